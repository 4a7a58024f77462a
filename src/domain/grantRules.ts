import { ServiceError } from './errors.js'

/** What a grant-like command needs to know to decide whether it may proceed. */
export interface GrantCheck {
  /** The pair is active in the catalog. */
  active: boolean
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
 * Revokes of role grants and of user overrides: the pair must be active, and
 * a non-root caller may only take away what it holds itself in that domain,
 * so nobody lifts a deny meant to restrict it or someone else.
 */
export function assertMayRevoke(check: Pick<GrantCheck, 'active' | 'callerIsRoot' | 'callerHolds' | 'obj' | 'act' | 'domain'>): void {
  assertInCatalog(check)
  if (!check.callerIsRoot && !check.callerHolds) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
}

/** Whether a row counting until `expiresAt` (null: for good) outlasts a holding that ends at `holdsUntil` (null: never). */
export function outlasts(expiresAt: number | null, holdsUntil: number | null): boolean {
  if (holdsUntil === null) return false
  return expiresAt === null || expiresAt > holdsUntil
}

/**
 * Grants and denies: the pair must be active, the target must not be root,
 * and a non-root caller hands out only what it holds itself in that domain,
 * for no longer than it holds it: a caller holding the pair until T through
 * an expiring override may grant or deny it until T at most (so never to a
 * role, whose grants do not expire), else it could make its own holding
 * permanent. A deny is held to the same term: denying is acting on the pair,
 * which the caller may do only while it holds it.
 */
export function assertMayGrant(check: GrantCheck): void {
  assertInCatalog(check)
  if (check.targetIsRoot) throw new ServiceError('ROOT_ROLE_NOT_GRANTABLE', { sub_role_code: check.targetRole })
  if (check.callerIsRoot) return
  if (!check.callerHolds || outlasts(check.expiresAt, check.callerHoldsUntil)) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
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
 * not), so a weaker admin cannot strip, or give back, more than it could
 * revoke or grant pair by pair; a new sub-role is held to
 * assertMayAssignSubRole besides (`newSubRoleBeyondCaller`, empty for a
 * status change).
 */
export function assertMayChangeAccount(check: {
  callerIsRoot: boolean
  heldByTargetOnly: readonly string[]
  newSubRoleBeyondCaller: readonly string[]
  domain: string
}): void {
  assertMayAssignSubRole({ callerIsRoot: check.callerIsRoot, beyondCaller: [...check.heldByTargetOnly, ...check.newSubRoleBeyondCaller], domain: check.domain })
}
