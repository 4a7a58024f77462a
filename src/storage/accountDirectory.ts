import type { Account } from '../domain/principals.js'
import { UUID_PATTERN } from '../domain/identifiers.js'
import { findAccountById, iterateAccounts } from './accounts.js'
import type { Queryable } from './db.js'
import { EndedTokens } from './endedTokens.js'

const uuid = new RegExp(UUID_PATTERN)

function addTo(bySubRole: Map<string, Set<string>>, account: Account): void {
  let ids = bySubRole.get(account.sub_role_code)
  if (ids === undefined) {
    ids = new Set()
    bySubRole.set(account.sub_role_code, ids)
  }
  ids.add(account.id)
}

/**
 * Every account in memory, and the tokens logged out, so authenticating a
 * request never waits on the database. Writers put what they committed; an
 * id not found in memory (an account made by another process) is read once
 * from the store.
 */
export class AccountDirectory {
  private byId = new Map<string, Account>()
  /** sub-role code → ids of the accounts holding it (root users for "who holds a pair"). */
  private bySubRole = new Map<string, Set<string>>()
  /**
   * One string per distinct sub-role, merchant, type and status, shared by
   * every account holding it: each decision reads them, and a few shared
   * strings stay in the CPU's caches where a hundred thousand copies do not.
   */
  private readonly pool = new Map<string, string>()
  private changes = 0
  private readonly ended: EndedTokens

  /** `now` is the clock a logged-out token's expiry is read against. */
  constructor(
    private readonly db: Queryable,
    now: () => number = Date.now,
  ) {
    this.ended = new EndedTokens(now)
  }

  /** Reads every account and logged-out token (from `q`, e.g. a snapshot) and swaps them in at once. */
  async load(q: Queryable = this.db): Promise<void> {
    await this.ended.load(q)
    const loaded = new Map<string, Account>()
    const bySubRole = new Map<string, Set<string>>()
    for await (const account of iterateAccounts(q)) {
      this.intern(account)
      loaded.set(account.id, account)
      addTo(bySubRole, account)
    }
    this.byId = loaded
    this.bySubRole = bySubRole
    this.changes++
  }

  /** Counts every change of the accounts: what was worked out from them holds while it stays. */
  get version(): number {
    return this.changes
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
    if (stored !== null) this.put(stored)
    return stored
  }

  put(account: Account): void {
    const previous = this.byId.get(account.id)
    if (previous !== undefined && previous.sub_role_code !== account.sub_role_code) {
      const ids = this.bySubRole.get(previous.sub_role_code)
      ids?.delete(account.id)
      if (ids?.size === 0) this.bySubRole.delete(previous.sub_role_code)
    }
    this.intern(account)
    this.byId.set(account.id, account)
    addTo(this.bySubRole, account)
    this.changes++
  }

  private intern(account: Account): void {
    const shared = (value: string): string => {
      const known = this.pool.get(value)
      if (known !== undefined) return known
      this.pool.set(value, value)
      return value
    }
    account.sub_role_code = shared(account.sub_role_code)
    account.status = shared(account.status) as Account['status']
    account.principal_type = shared(account.principal_type) as Account['principal_type']
    if (account.merchant_id !== null) account.merchant_id = shared(account.merchant_id)
  }

  /** A token logged out: refused until `expiresAt` (epoch milliseconds), then forgotten. */
  endToken(accountId: string | null, jti: string, expiresAt: number): void {
    this.ended.add(accountId, jti, expiresAt)
  }

  tokenEnded(accountId: string, jti: string): boolean {
    return this.ended.has(accountId, jti)
  }

  /** How many logged-out tokens are remembered. */
  get endedTokens(): number {
    return this.ended.size
  }

  /** The accounts holding this sub-role. */
  *withSubRole(code: string): IterableIterator<Account> {
    for (const id of this.bySubRole.get(code) ?? []) {
      const account = this.byId.get(id)
      if (account !== undefined) yield account
    }
  }

  /** The sub-role codes some account holds. */
  subRoles(): IterableIterator<string> {
    return this.bySubRole.keys()
  }

  /** Every account in memory. */
  all(): IterableIterator<Account> {
    return this.byId.values()
  }

  get size(): number {
    return this.byId.size
  }
}
