import type { Account } from '../domain/principals.js'
import { UUID_PATTERN } from '../domain/identifiers.js'
import { findAccountById, iterateAccounts } from './accounts.js'
import type { Queryable } from './db.js'

const uuid = new RegExp(UUID_PATTERN)

/**
 * Every account in memory, so authenticating a request never waits on the
 * database. Writers put what they committed; an id not found in memory (an
 * account made by another process) is read once from the store.
 */
export class AccountDirectory {
  private byId = new Map<string, Account>()

  constructor(private readonly db: Queryable) {}

  /** Reads every account (from `q`, e.g. a snapshot) and swaps them in at once. */
  async load(q: Queryable = this.db): Promise<void> {
    const loaded = new Map<string, Account>()
    for await (const account of iterateAccounts(q)) loaded.set(account.id, account)
    this.byId = loaded
  }

  /** Ids are compared in their canonical (lower-case) form, as the store writes them. */
  peek(id: string): Account | undefined {
    return this.byId.get(id) ?? this.byId.get(id.toLowerCase())
  }

  async get(requested: string): Promise<Account | null> {
    const id = requested.toLowerCase()
    const known = this.byId.get(id)
    if (known !== undefined) return known
    if (!uuid.test(id)) return null
    const stored = await findAccountById(this.db, id)
    if (stored !== null) this.byId.set(stored.id, stored)
    return stored
  }

  put(account: Account): void {
    this.byId.set(account.id, account)
  }

  get size(): number {
    return this.byId.size
  }
}
