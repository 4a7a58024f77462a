import { ServiceError } from './errors.js'
import { GLOBAL_DOMAIN, canReachAccount, homeDomain, type Account } from './principals.js'

/**
 * Which domain a request is about. Merchant callers are always forced to
 * their own merchant, whatever they asked for; system owners choose, with a
 * default that depends on the endpoint.
 */
export function forcedDomain(caller: Pick<Account, 'principal_type' | 'merchant_id'>, requested: string | undefined, fallback: string): string {
  if (caller.principal_type === 'merchant' && caller.merchant_id !== null) return caller.merchant_id
  return requested ?? fallback
}

/** Role endpoints default to `global`. */
export function roleDomain(caller: Pick<Account, 'principal_type' | 'merchant_id'>, requested: string | undefined): string {
  return forcedDomain(caller, requested, GLOBAL_DOMAIN)
}

/** User endpoints default to the target user's home domain. */
export function userDomain(
  caller: Pick<Account, 'principal_type' | 'merchant_id'>,
  target: Pick<Account, 'principal_type' | 'merchant_id'>,
  requested: string | undefined,
): string {
  return forcedDomain(caller, requested, homeDomain(target))
}

/** A user outside the caller's tenant is answered exactly like one that does not exist. */
export function assertReachable(caller: Pick<Account, 'principal_type' | 'merchant_id'>, target: Account | null): Account {
  if (target === null || !canReachAccount(caller, target)) throw new ServiceError('USER_NOT_FOUND')
  return target
}

/** A merchant user's overrides always live in its merchant. */
export function assertOverrideDomain(target: Pick<Account, 'principal_type' | 'merchant_id'>, domain: string): void {
  const home = homeDomain(target)
  if (target.principal_type === 'merchant' && domain !== home) {
    throw new ServiceError('OVERRIDE_OUTSIDE_HOME_DOMAIN', { home })
  }
}
