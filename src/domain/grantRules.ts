import { ServiceError } from './errors.js'

/** What a grant-like command needs to know to decide whether it may proceed. */
export interface GrantCheck {
  /** The pair is active in the catalog. */
  active: boolean
  /** The caller's sub-role is root (it may grant anything). */
  callerIsRoot: boolean
  /** The caller itself holds the pair in the target domain. */
  callerHolds: boolean
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

/**
 * Grants and denies: the pair must be active, the target must not be root,
 * and a non-root caller hands out only what it holds itself in that domain.
 */
export function assertMayGrant(check: GrantCheck): void {
  assertInCatalog(check)
  if (check.targetIsRoot) throw new ServiceError('ROOT_ROLE_NOT_GRANTABLE', { sub_role_code: check.targetRole })
  if (!check.callerIsRoot && !check.callerHolds) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
}

/**
 * Registration: a non-root caller may only create accounts whose sub-role
 * holds nothing the caller lacks in the new account's domain; otherwise it
 * could log in as the account it made and hold more than it was given.
 */
export function assertMayAssignSubRole(check: { callerIsRoot: boolean; beyondCaller: readonly string[]; domain: string }): void {
  if (!check.callerIsRoot && check.beyondCaller.length > 0) throw new ServiceError('PRIVILEGE_ESCALATION', { domain: check.domain })
}
