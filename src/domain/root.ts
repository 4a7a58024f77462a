/**
 * Root. A sub-role is root when its `sub_roles.is_root` flag is set, and
 * that flag is the only definition: a root sub-role holds every permission in
 * every domain (the engine answers before the model), takes no grants or
 * overrides, is never registered, and is neither given nor taken away by a
 * sub-role change. SQL asks the same flag
 * (`sub_role_code IN (SELECT code FROM sub_roles WHERE is_root)`), never a name.
 *
 * `super_admin` is the name of the root sub-role that the first migration
 * creates and flags, and the one bootstrap and onboarding give to the first
 * account of the system and of each merchant: a name to give, not a test.
 */
import type { Account } from './principals.js'

/** The root sub-role every system and merchant starts with (flagged root from the first migration on). */
export const ROOT_SUB_ROLE = 'super_admin'

/** The root sub-roles as loaded from `sub_roles.is_root` (the engine holds them and follows their changes). */
export interface RootRoles {
  isRootRole(code: string): boolean
}

/** The codes flagged root among the stored sub-roles: what the engine is loaded with. */
export function rootRoleCodes(subRoles: Iterable<{ code: string; is_root: boolean }>): string[] {
  return [...subRoles].filter((r) => r.is_root).map((r) => r.code)
}

/** Whether a sub-role is root. */
export function isRootSubRole(roots: RootRoles, code: string): boolean {
  return roots.isRootRole(code)
}

/** Whether an account is root: its sub-role is. */
export function isRootAccount(roots: RootRoles, account: Pick<Account, 'sub_role_code'>): boolean {
  return isRootSubRole(roots, account.sub_role_code)
}

/** An account as the API shows it: with `is_root`, so a client never has to guess root from a sub-role's name. */
export function withRootFlag<T extends Pick<Account, 'sub_role_code'>>(roots: RootRoles, account: T): T & { is_root: boolean } {
  return { ...account, is_root: isRootAccount(roots, account) }
}
