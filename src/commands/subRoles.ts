import { subRoleCreatedEntry } from '../domain/audit.js'
import { ServiceError } from '../domain/errors.js'
import { isRootSubRole } from '../domain/root.js'
import { roleDomain } from '../domain/tenancy.js'
import { insertSubRole, listDomainSubRoles, subRoleKnownIn, type SubRoleSummary } from '../storage/subRoles.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { DEFAULT_PAGE_SIZE } from './getAuditLog.js'
import { assertDomainExists } from './permissionContext.js'

export interface SubRoleQuery {
  domain?: string | undefined
  page?: number | undefined
  page_size?: number | undefined
}

export interface SubRolePage {
  items: SubRoleSummary[]
  page: number
  page_size: number
  total: number
}

/** list-sub-roles: the sub-roles known in a domain (`global` by default; a merchant caller's own merchant, always). */
export async function listSubRoles(ctx: Pick<CommandContext, 'db'>, caller: Caller, query: SubRoleQuery): Promise<SubRolePage> {
  const domain = roleDomain(caller.account, query.domain)
  await assertDomainExists(ctx.db, domain)
  const page = query.page ?? 1
  const pageSize = query.page_size ?? DEFAULT_PAGE_SIZE
  const { items, total } = await listDomainSubRoles(ctx.db, domain, page, pageSize)
  return { items, page, page_size: pageSize, total }
}

export interface CreateSubRoleInput {
  code: string
  label: string
  domain?: string | undefined
}

export interface CreatedSubRole {
  code: string
  label: string
  domain: string
  is_root: false
  revision: number
}

/**
 * create-sub-role: a sub-role with a label in one domain (a merchant caller's
 * own merchant, always; a system owner's choice, `global` by default, where
 * it is a template known in every domain). Codes are unique per domain only.
 * The row, its audit entry and its change go in one transaction; other
 * replicas learn it from the change feed.
 */
export async function createSubRole(ctx: CommandContext, caller: Caller, input: CreateSubRoleInput): Promise<CreatedSubRole> {
  // A root sub-role exists from the start and is never made again, whatever the label.
  if (isRootSubRole(ctx.engine, input.code)) throw new ServiceError('VALIDATION_FAILED', {}, [{ field: 'code', message: 'reserved' }])
  const domain = roleDomain(caller.account, input.domain)
  await assertDomainExists(ctx.db, domain)
  const outcome = await ctx.writes.run(async (tx) => {
    if (!(await insertSubRole(tx, domain, input.code, input.label))) throw new ServiceError('SUB_ROLE_EXISTS', { sub_role_code: input.code })
    return {
      changed: true,
      audit: [subRoleCreatedEntry(input.code, domain, actorOf(caller))],
      changes: [{ kind: 'sub_role' as const, code: input.code, domain, label: input.label, is_root: false }],
      result: null,
    }
  })
  return { code: input.code, label: input.label, domain, is_root: false, revision: outcome.revision }
}

/**
 * With SUB_ROLES_EXPLICIT a grant, registration or sub-role change in a
 * domain must name a sub-role created there or in `global`; one that exists
 * only in another merchant is answered exactly as one never created, so no
 * answer tells a merchant what another has. Otherwise any code is created
 * on first use. Sub-roles are never removed, so asking before the write's
 * transaction is safe.
 */
export async function assertSubRoleKnown(ctx: Pick<CommandContext, 'db' | 'subRolesExplicit'>, domain: string, code: string): Promise<void> {
  if (ctx.subRolesExplicit !== true) return
  if (!(await subRoleKnownIn(ctx.db, domain, code))) throw new ServiceError('SUB_ROLE_NOT_FOUND', { sub_role_code: code })
}
