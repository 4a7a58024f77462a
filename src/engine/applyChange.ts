import type { StoreChange } from '../domain/changes.js'
import { GLOBAL_DOMAIN, type Account } from '../domain/principals.js'
import type { AccountDirectory } from '../storage/accountDirectory.js'
import type { PermissionEngine } from './engine.js'
import type { ShadowEngine } from './shadowEngine.js'

/** What a committed change moves in this process's memory: the policy, the account directory, and the shadow model's engine when there is one. */
export interface InMemoryState {
  engine: PermissionEngine
  accounts: AccountDirectory
  shadow?: ShadowEngine | null
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
    case 'catalog':
    case 'sub_role':
      await applyToEngine(memory.engine, change)
      // After the live engine: the shadow follows, and never fails the live change.
      await memory.shadow?.follow((shadow) => applyToEngine(shadow, change))
      return
    case 'account':
      memory.accounts.put(reviveAccount(change.account))
      return
    case 'token_ended':
      memory.accounts.endToken(change.account_id ?? null, change.jti, Date.parse(change.expires_at))
      return
    case 'merchant':
      // Merchants are read from the database where they matter; nothing in memory.
      return
  }
}

/** The changes an engine holds: rules, the catalog, root sub-roles. */
async function applyToEngine(engine: PermissionEngine, change: Extract<StoreChange, { kind: 'rule' | 'catalog' | 'sub_role' }>): Promise<void> {
  switch (change.kind) {
    case 'rule':
      if (change.op === 'add') await engine.addRule(change.ptype, change.values, expiryOf(change.expires_at))
      else await engine.removeRule(change.ptype, change.values)
      return
    case 'catalog':
      engine.replaceCatalog(change.entries)
      return
    case 'sub_role':
      // Only `global` sub-roles are root; a merchant's sub-role of the same code must not clear a template's flag.
      if ((change.domain ?? GLOBAL_DOMAIN) === GLOBAL_DOMAIN) engine.setRootRole(change.code, change.is_root)
      return
  }
}

/**
 * Takes every override whose instant has passed out of the live engine's
 * decisions, and out of the shadow's; returns the live engine's rows.
 */
export async function expireDue(memory: InMemoryState): Promise<Array<readonly string[]>> {
  const due = await memory.engine.expireDue()
  await memory.shadow?.follow((shadow) => shadow.expireDue())
  return due
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
