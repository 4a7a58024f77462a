import type { CatalogEntry } from './permissions.js'
import type { Account } from './principals.js'

/**
 * What one committed write changed, as every replica applies it to memory:
 * the same list is applied by the writer after its commit and, read from the
 * change feed, by every other replica. Each change sets a state absolutely
 * (a row is there or not, an account is this), so applying a suffix of the
 * feed again over a newer state still ends in the right state.
 */
export type StoreChange =
  | { kind: 'rule'; op: 'add' | 'remove'; ptype: 'p' | 'g'; values: string[]; expires_at?: string | null }
  | { kind: 'account'; account: Account }
  | { kind: 'catalog'; entries: CatalogEntry[] }
  /** A sub-role created in a domain (absent in changes written before sub-roles had one: read as `global`). */
  | { kind: 'sub_role'; code: string; domain?: string; label?: string | null; is_root: boolean }
  | { kind: 'merchant'; id: string }
  /** One token logged out: refused until it expires (an RFC 3339 instant), when it is forgotten. */
  /** `account_id` is absent from changes written before ended tokens were per account. */
  | { kind: 'token_ended'; account_id?: string; jti: string; expires_at: string }

/** An added rule; an override that expires carries its instant (RFC 3339), so every replica sets the same timer. */
export const ruleAdded = (ptype: 'p' | 'g', values: string[], expiresAt: Date | null = null): StoreChange =>
  expiresAt === null ? { kind: 'rule', op: 'add', ptype, values } : { kind: 'rule', op: 'add', ptype, values, expires_at: expiresAt.toISOString() }
export const ruleRemoved = (ptype: 'p' | 'g', values: string[]): StoreChange => ({ kind: 'rule', op: 'remove', ptype, values })
