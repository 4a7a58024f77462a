import { ServiceError } from './errors.js'
import type { CatalogScope } from './permissions.js'
import { GLOBAL_DOMAIN } from './principals.js'

/** A user override as memory holds it: its effect and when it stops counting (epoch ms; null: never). */
export interface OverrideTerm {
  effect: 'allow' | 'deny'
  expiresAt: number | null
}

/** What a grant-like command needs to know to decide whether it may proceed. */
export interface GrantCheck {
  /** The pair is active in the catalog. */
  active: boolean
  /** The pair's catalog scope: a `platform` pair is for system-owner users only. */
  scope: CatalogScope
  /** The caller's sub-role is root (it may grant anything). */
  callerIsRoot: boolean
  /** The caller itself holds the pair in the target domain. */
  callerHolds: boolean
  /**
   * When the caller stops holding the pair there (epoch ms): the latest
   * expiry of the overrides its holding rests on; null when nothing that
   * expires is needed (root, a role grant, an override without expiry).
   */
  callerHoldsUntil: number | null
  /** When the grant or deny asked for stops counting (epoch ms); null when it does not expire (role grants never do). */
  expiresAt: number | null
  /** The role or user receiving the change is root (it bypasses enforcement, so rows would be meaningless). */
  targetIsRoot: boolean
  /** The change is an override of a merchant user (false for a role). */
  targetIsMerchantUser: boolean
  /**
   * The deny override the change takes away or shortens (see liftedDeny):
   * the instant it would have stopped counting (null: never); undefined when it lifts none.
   */
  liftedDenyUntil?: number | null | undefined
  targetRole: string
  obj: string
  act: string
  domain: string
}

/** Only active catalog pairs can be granted, denied or revoked. */
export function assertInCatalog(check: Pick<GrantCheck, 'active' | 'obj' | 'act'>): void {
  if (!check.active) throw new ServiceError('PERMISSION_NOT_IN_CATALOG', { obj: check.obj, act: check.act })
}

/**
 * A `platform` pair (only system-owner users can ever use it) is granted,
 * denied or overridden only in `global` and never for a merchant user: a row
 * anywhere else could never count, and would show access nobody has.
 */
export function assertScopeAllows(check: Pick<GrantCheck, 'scope' | 'targetIsMerchantUser' | 'obj' | 'act' | 'domain'>): void {
  if (check.scope === 'platform' && (check.domain !== GLOBAL_DOMAIN || check.targetIsMerchantUser)) {
    throw new ServiceError('PLATFORM_PERMISSION_IN_MERCHANT', { obj: check.obj, act: check.act, domain: check.domain })
  }
}

/**
 * The deny an override change takes away, as the instant it would have
 * stopped counting (null: never): the current override when it is a deny
 * and the change removes it (`next` null), turns it into an allow, or
 * replaces it with a deny that ends sooner; undefined when it lifts none.
 */
export function liftedDeny(current: OverrideTerm | null, next: OverrideTerm | null): number | null | undefined {
  if (current?.effect !== 'deny') return undefined
  if (next?.effect === 'deny' && !outlasts(current.expiresAt, next.expiresAt)) return undefined
  return current.expiresAt
}

/**
 * Lifting a deny widens access: a non-root caller holding the pair only
 * until T may lift one that would have counted until T at most, else the
 * user it restricted would hold the pair past the caller's own term (for
 * good, with a permanent deny), as a grant past T would give it.
 */
function assertLiftWithinTerm(check: Pick<GrantCheck, 'callerHoldsUntil' | 'liftedDenyUntil' | 'domain'>): void {
  if (check.liftedDenyUntil !== undefined && outlasts(check.liftedDenyUntil, check.callerHoldsUntil)) {
    throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
  }
}

/**
 * Revokes of role grants and of user overrides: the pair must be active, and
 * a non-root caller may only take away what it holds itself in that domain,
 * so nobody lifts a deny meant to restrict it or someone else; a deny it
 * lifts is held to its own holding term (assertLiftWithinTerm). Revokes of a
 * `platform` pair anywhere are allowed: they clear rows that never counted.
 */
export function assertMayRevoke(
  check: Pick<GrantCheck, 'active' | 'callerIsRoot' | 'callerHolds' | 'callerHoldsUntil' | 'liftedDenyUntil' | 'obj' | 'act' | 'domain'>,
): void {
  assertInCatalog(check)
  if (check.callerIsRoot) return
  if (!check.callerHolds) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
  assertLiftWithinTerm(check)
}

/** Whether a row counting until `expiresAt` (null: for good) outlasts a holding that ends at `holdsUntil` (null: never). */
export function outlasts(expiresAt: number | null, holdsUntil: number | null): boolean {
  if (holdsUntil === null) return false
  return expiresAt === null || expiresAt > holdsUntil
}

/**
 * Grants and denies: the pair must be active and its scope allow the
 * target, the target must not be root, and a non-root caller hands out only
 * what it holds itself in that domain, for no longer than it holds it: a
 * caller holding the pair until T through an expiring override may grant or
 * deny it until T at most (so never to a role, whose grants do not expire),
 * else it could make its own holding permanent. A deny is held to the same
 * term: denying is acting on the pair, which the caller may do only while it
 * holds it; so is a deny the change replaces (assertLiftWithinTerm).
 */
export function assertMayGrant(check: GrantCheck): void {
  assertInCatalog(check)
  assertScopeAllows(check)
  if (check.targetIsRoot) throw new ServiceError('ROOT_ROLE_NOT_GRANTABLE', { sub_role_code: check.targetRole })
  if (check.callerIsRoot) return
  if (!check.callerHolds || outlasts(check.expiresAt, check.callerHoldsUntil)) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
  assertLiftWithinTerm(check)
}

/**
 * Registration and change-sub-role: a non-root caller may only give an
 * account a sub-role holding nothing the caller lacks, or holds only until an
 * override of its own expires, in the account's domain; otherwise it could
 * log in as the account it made and hold more, or longer, than it was given.
 */
export function assertMayAssignSubRole(check: { callerIsRoot: boolean; beyondCaller: readonly string[]; domain: string }): void {
  if (!check.callerIsRoot && check.beyondCaller.length > 0) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
}

/**
 * change-sub-role, deactivate and reactivate: a non-root caller may change
 * only accounts whose effective set in their home domain it holds itself
 * (`heldByTargetOnly`: what the account holds there and the caller does
 * not), and never a root account (`targetRoot`: its root sub-role), so a
 * weaker admin cannot strip, or give back, more than it could revoke or
 * grant pair by pair: refused with the peer rule's own code, naming the
 * first thing the caller lacks. A new sub-role is held to
 * assertMayAssignSubRole besides (`newSubRoleBeyondCaller`, empty for a
 * status change).
 */
export function assertMayChangeAccount(check: {
  callerIsRoot: boolean
  targetRoot?: string | null | undefined
  heldByTargetOnly: readonly string[]
  newSubRoleBeyondCaller: readonly string[]
  domain: string
}): void {
  if (check.callerIsRoot) return
  const lacking = check.heldByTargetOnly[0] ?? check.targetRoot
  if (lacking !== undefined && lacking !== null) throw new ServiceError('ACCOUNT_BEYOND_CALLER', { permission: lacking, domain: check.domain })
  assertMayAssignSubRole({ callerIsRoot: false, beyondCaller: check.newSubRoleBeyondCaller, domain: check.domain })
}
