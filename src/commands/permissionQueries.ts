import { ServiceError } from '../domain/errors.js'
import { routePermissions, type CatalogEntry } from '../domain/permissions.js'
import { GLOBAL_DOMAIN, homeDomain, type Account } from '../domain/principals.js'
import { assertReachable, roleDomain, userDomain } from '../domain/tenancy.js'
import { byCodeUnits } from '../domain/textOrder.js'
import { effectivePermissions, type EffectivePermission } from '../engine/effective.js'
import type { PermissionEngine } from '../engine/engine.js'
import type { AccountDirectory } from '../storage/accountDirectory.js'
import type { Caller, CommandContext } from './context.js'
import { assertDomainExists } from './permissionContext.js'
import { isRootAccount, isRootSubRole } from '../domain/root.js'
import type { ForwardAuthAsk } from '../domain/routeMap.js'
import { allows, type ReasonCode } from '../engine/explain.js'

export interface RolePermissions {
  sub_role_code: string
  domain: string
  is_root: boolean
  permissions: Array<{ obj: string; act: string; domain: string; label: string; group_name: string }>
  /** The pairs the sub-role is denied in the domain or in `global`: a role's deny is lifted by no command, so a client shows them as fixed. */
  denied: Array<{ obj: string; act: string; domain: string; label: string; group_name: string }>
}

export interface UserPermissions {
  user_id: string
  domain: string
  sub_role_code: string
  is_root: boolean
  permissions: EffectivePermission[]
}

export function getCatalog(engine: PermissionEngine): CatalogEntry[] {
  return engine
    .catalogEntries()
    .sort((a, b) => byCodeUnits(a.group_name, b.group_name) || byCodeUnits(a.obj, b.obj) || byCodeUnits(a.act, b.act))
}

/**
 * get-role-permissions: a root sub-role lists the whole active catalog; any
 * other lists its allow grants in the domain and in `global`, minus pairs the
 * sub-role is denied there. In a merchant's domain `platform` pairs are left
 * out: no merchant user holds one, whatever a `global` row says.
 */
export async function getRolePermissions(ctx: CommandContext, caller: Caller, subRole: string, requested: string | undefined): Promise<RolePermissions> {
  const domain = roleDomain(caller.account, requested)
  await assertDomainExists(ctx.db, domain)
  const isRoot = isRootSubRole(ctx.engine, subRole)
  const holdable = (entry: CatalogEntry | undefined): entry is CatalogEntry =>
    entry?.is_active === true && (domain === GLOBAL_DOMAIN || entry.scope !== 'platform')
  const active = ctx.engine.catalogEntries().filter(holdable)
  if (isRoot) {
    const permissions = active.map((e) => ({ obj: e.obj, act: e.act, domain, label: e.label, group_name: e.group_name }))
    return { sub_role_code: subRole, domain, is_root: true, permissions, denied: [] }
  }
  const rules = ctx.engine.rulesOf(subRole, domain === GLOBAL_DOMAIN ? [GLOBAL_DOMAIN] : [domain, GLOBAL_DOMAIN])
  const denied = new Set(rules.filter((r) => r.effect === 'deny').map((r) => `${r.obj}:${r.act}`))
  const listed = (effect: 'allow' | 'deny') =>
    rules
      .filter((r) => r.effect === effect && (effect === 'deny' || !denied.has(`${r.obj}:${r.act}`)))
      .flatMap((r) => {
        const entry = ctx.engine.catalogEntry(r.obj, r.act)
        return holdable(entry) ? [{ obj: r.obj, act: r.act, domain: r.domain, label: entry.label, group_name: entry.group_name }] : []
      })
      .sort((a, b) => byCodeUnits(a.obj, b.obj) || byCodeUnits(a.act, b.act) || byCodeUnits(a.domain, b.domain))
  return { sub_role_code: subRole, domain, is_root: false, permissions: listed('allow'), denied: listed('deny') }
}

function userPermissions(engine: PermissionEngine, subject: Account, domain: string): UserPermissions {
  return {
    user_id: subject.id,
    domain,
    sub_role_code: subject.sub_role_code,
    is_root: isRootAccount(engine, subject),
    permissions: effectivePermissions(engine, subject, domain),
  }
}

/** get-user-permissions: another user's effective set (same computation as the caller's own). */
export async function getUserPermissions(ctx: CommandContext, caller: Caller, userId: string, requested: string | undefined): Promise<UserPermissions> {
  const target = assertReachable(caller.account, await ctx.accounts.get(userId))
  const domain = userDomain(caller.account, target, requested)
  await assertDomainExists(ctx.db, domain)
  return userPermissions(ctx.engine, target, domain)
}

/** GET /v2/profile/permissions: the caller's own effective set. */
export async function getOwnPermissions(ctx: Pick<CommandContext, 'db' | 'engine'>, caller: Caller, requested: string | undefined): Promise<UserPermissions> {
  const domain = userDomain(caller.account, caller.account, requested)
  await assertDomainExists(ctx.db, domain)
  return userPermissions(ctx.engine, caller.account, domain)
}

export interface CheckQuery {
  obj: string
  act: string
  domain?: string | undefined
}

export interface CheckResult {
  obj: string
  act: string
  domain: string
  allowed: boolean
}

/** What the check path needs: memory only, never the database. */
export interface CheckContext {
  engine: PermissionEngine
  accounts: Pick<AccountDirectory, 'peek'>
}

/**
 * The subject of a check: the caller, or with `user_id` another user, which
 * needs `permission:read` and, for merchant callers, a user of their merchant.
 */
export function checkSubject(ctx: CheckContext, caller: Caller, userId: string | undefined): Account {
  if (userId === undefined) return caller.account
  const read = routePermissions.permissionRead
  if (!ctx.engine.decide(caller.account, homeDomain(caller.account), read.obj, read.act)) {
    throw new ServiceError('PERMISSION_DENIED', { permission: `${read.obj}:${read.act}` })
  }
  return assertReachable(caller.account, ctx.accounts.peek(userId) ?? null)
}

/**
 * Told of each gateway decision right after its evaluation, while
 * `engine.decidingRule()` still names the row that decided: the decision
 * log's hand-over. `index` is the check's place in a batch (0 for one check).
 */
export type OnDecision = (index: number, domain: string, obj: string, act: string, code: ReasonCode) => void

/** The domain a gateway question is about: the one it names, else the subject's home domain (never forced). */
export function checkDomain(subject: Account, domain: string | undefined): string {
  return domain ?? homeDomain(subject)
}

/**
 * The gateway's question as its reason code (it allows exactly when
 * `allows(code)`), with no hand-over: for a caller that hands the decision
 * to the log only when the log keeps it, so an answer the log does not
 * keep costs what it costs with no log. `engine.decidingRule()` names the
 * deciding row until the next decision.
 */
export function checkCode(ctx: CheckContext, subject: Account, domain: string, obj: string, act: string): ReasonCode {
  return ctx.engine.decision(subject, domain, obj, act)
}

/** The gateway's question; the default domain is the subject's home domain, never forced. */
export function checkPermission(ctx: CheckContext, subject: Account, query: CheckQuery, onDecision?: OnDecision): boolean {
  const domain = checkDomain(subject, query.domain)
  const code = checkCode(ctx, subject, domain, query.obj, query.act)
  onDecision?.(0, domain, query.obj, query.act, code)
  return allows(code)
}

/** check-batch: each question answered as a single check, in request order, with its domain resolved. */
export function checkPermissions(ctx: CheckContext, subject: Account, queries: readonly CheckQuery[], onDecision?: OnDecision): CheckResult[] {
  const home = homeDomain(subject)
  return queries.map((q, index) => {
    const domain = q.domain ?? home
    const code = ctx.engine.decision(subject, domain, q.obj, q.act)
    onDecision?.(index, domain, q.obj, q.act, code)
    return { obj: q.obj, act: q.act, domain, allowed: allows(code) }
  })
}

/** Whether forward auth (verify, ext_authz) allows: only a pair the account may do. */
export function forwardAuthAllows(ctx: CheckContext, account: Account, ask: ForwardAuthAsk, onDecision?: OnDecision): boolean {
  return ask !== null && !('ambiguous' in ask) && checkPermission(ctx, account, ask, onDecision)
}
