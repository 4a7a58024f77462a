import type { StoreChange } from '../domain/changes.js'
import { GLOBAL_DOMAIN, type Account } from '../domain/principals.js'
import type { AccountDirectory } from '../storage/accountDirectory.js'
import type { PermissionEngine } from './engine.js'

/** What a committed change moves in this process's memory: the policy and the account directory. */
export interface InMemoryState {
  engine: PermissionEngine
  accounts: AccountDirectory
}

/**
 * Applies one committed change to memory. The only way memory follows the
 * store: a write of this process right after its commit, and every other
 * process's write read from the change feed, both come through here, so a
 * change means the same whichever process made it.
 */
export async function applyChange(memory: InMemoryState, change: StoreChange): Promise<void> {
  switch (change.kind) {
    case 'rule':
      if (change.op === 'add') await memory.engine.addRule(change.ptype, change.values, expiryOf(change.expires_at))
      else await memory.engine.removeRule(change.ptype, change.values)
      return
    case 'account':
      memory.accounts.put(reviveAccount(change.account))
      return
    case 'catalog':
      memory.engine.replaceCatalog(change.entries)
      return
    case 'sub_role':
      // Only `global` sub-roles are root; a merchant's sub-role of the same code must not clear a template's flag.
      if ((change.domain ?? GLOBAL_DOMAIN) === GLOBAL_DOMAIN) memory.engine.setRootRole(change.code, change.is_root)
      return
    case 'token_ended':
      memory.accounts.endToken(change.account_id ?? null, change.jti, Date.parse(change.expires_at))
      return
    case 'merchant':
      // Merchants are read from the database where they matter; nothing in memory.
      return
  }
}

const expiryOf = (text: string | null | undefined): number | null => (typeof text === 'string' ? Date.parse(text) : null)

/** Accounts from the feed went through JSON: their times are text again. */
function reviveAccount(account: Account): Account {
  const changedAt: unknown = account.credentials_changed_at
  return {
    ...account,
    created_at: new Date(account.created_at),
    // Absent in changes written before the column existed.
    credentials_changed_at: typeof changedAt === 'string' || changedAt instanceof Date ? new Date(changedAt) : null,
  }
}
