import { ServiceError } from '../domain/errors.js'
import { routePermissions } from '../domain/permissions.js'
import { canReachAccount, homeDomain, type Account } from '../domain/principals.js'
import { roleDomain } from '../domain/tenancy.js'
import type { Explanation } from '../engine/explain.js'
import { holdersPage, type Holder } from '../engine/holders.js'
import type { Caller, CommandContext } from './context.js'
import { DEFAULT_PAGE_SIZE } from './getAuditLog.js'
import { assertDomainExists } from './permissionContext.js'
import { checkSubject, type CheckContext, type CheckQuery, type CheckResult } from './permissionQueries.js'

/** A grant, deny or revoke command's data may ask for a preview instead of the change. */
export interface DryRun {
  dry_run?: boolean | undefined
}

export interface HoldersQuery {
  obj: string
  act: string
  domain?: string | undefined
  page?: number | undefined
  page_size?: number | undefined
}

export interface HoldersPage {
  domain: string
  items: Holder[]
  page: number
  page_size: number
  total: number
}

/**
 * Who holds a pair in a domain (`global` by default; merchant callers are
 * forced to their merchant and see its users only): every active user a
 * check allows, by e-mail, a page at a time.
 */
export async function listPermissionHolders(ctx: CommandContext, caller: Caller, query: HoldersQuery): Promise<HoldersPage> {
  const domain = roleDomain(caller.account, query.domain)
  await assertDomainExists(ctx.db, domain)
  const page = query.page ?? 1
  const pageSize = query.page_size ?? DEFAULT_PAGE_SIZE
  const scope = caller.account.principal_type === 'merchant' ? `merchant ${caller.account.merchant_id ?? ''}` : 'all'
  const visible = (account: Account) => canReachAccount(caller.account, account)
  const { items, total } = holdersPage(ctx.engine, ctx.accounts, { obj: query.obj, act: query.act, domain, scope, visible }, (page - 1) * pageSize, pageSize)
  return { domain, items, page, page_size: pageSize, total }
}

/**
 * GET /v2/authz/check with `explain=true`: the decision and why. Explaining
 * shows how the policy is built, so it needs permission:read (in the
 * caller's home domain) even about oneself.
 */
export function explainCheck(ctx: CheckContext, caller: Caller, userId: string | undefined, query: CheckQuery): Explanation {
  const subject = explainedSubject(ctx, caller, userId)
  // The check's own default domain: the subject's home.
  return ctx.engine.explain(subject, query.domain ?? homeDomain(subject), query.obj, query.act)
}

function explainedSubject(ctx: CheckContext, caller: Caller, userId: string | undefined): Account {
  const read = routePermissions.permissionRead
  if (!ctx.engine.decide(caller.account, homeDomain(caller.account), read.obj, read.act)) {
    throw new ServiceError('PERMISSION_DENIED', { permission: `${read.obj}:${read.act}` })
  }
  return checkSubject(ctx, caller, userId)
}

/** check-batch with `explain`: each check answered as a single one with `explain=true`, in request order. */
export function explainChecks(
  ctx: CheckContext,
  caller: Caller,
  userId: string | undefined,
  queries: readonly CheckQuery[],
): Array<CheckResult & Pick<Explanation, 'reason'>> {
  const subject = explainedSubject(ctx, caller, userId)
  const home = homeDomain(subject)
  return queries.map((q) => {
    const domain = q.domain ?? home
    return { obj: q.obj, act: q.act, domain, ...ctx.engine.explain(subject, domain, q.obj, q.act) }
  })
}
