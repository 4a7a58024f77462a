import type { Queryable } from './db.js'

/** Records a logged-out token of one account; a token logged out twice (two replicas at once) is one row. */
export async function insertEndedToken(tx: Queryable, jti: string, accountId: string, expiresAt: Date): Promise<void> {
  await tx.query('INSERT INTO ended_tokens (jti, account_id, expires_at) VALUES ($1, $2, $3) ON CONFLICT (account_id, jti) DO NOTHING', [jti, accountId, expiresAt])
}

/** Forgets the tokens that have expired by `now`: they are refused for their expiry alone. */
export async function deleteExpiredEndedTokens(tx: Queryable, now: Date): Promise<void> {
  await tx.query('DELETE FROM ended_tokens WHERE expires_at <= $1', [now])
}

/** The logged-out tokens still unexpired at `now`, with their expiry in epoch milliseconds. */
export async function listEndedTokens(q: Queryable, now: Date): Promise<Array<{ accountId: string; jti: string; expiresAt: number }>> {
  const { rows } = await q.query<{ account_id: string; jti: string; expires_at: Date | string }>(
    'SELECT account_id, jti, expires_at FROM ended_tokens WHERE expires_at > $1',
    [now],
  )
  return rows.map((row) => ({ accountId: row.account_id, jti: row.jti, expiresAt: new Date(row.expires_at).getTime() }))
}

/** An account id never holds a NUL: the key of one account's `jti`. */
const endedKey = (accountId: string, jti: string): string => `${accountId}\u0000${jti}`
/** Stands for every account (no account id is empty). */
const ANY_ACCOUNT = ''

/** At most one sweep of the expired entries per this many milliseconds, however many logouts come. */
const SWEEP_EVERY_MS = 1000

/**
 * The logged-out tokens in memory, by account and `jti` (an external
 * issuer's `jti` may repeat across accounts), so that authenticating a
 * request never waits on the database. An entry is kept until its token
 * would have expired: expired entries are swept when a logout is added
 * (at most once a second) and never loaded, so what is held is bounded by
 * the logouts of one token lifetime.
 */
export class EndedTokens {
  private until = new Map<string, number>()
  private nextSweep = 0

  constructor(private readonly now: () => number) {}

  /** Reads the unexpired entries (from `q`, e.g. a snapshot) and swaps them in at once. */
  async load(q: Queryable): Promise<void> {
    const now = this.now()
    const loaded = new Map<string, number>()
    for (const { accountId, jti, expiresAt } of await listEndedTokens(q, new Date(now))) loaded.set(endedKey(accountId, jti), expiresAt)
    this.until = loaded
    this.nextSweep = now + SWEEP_EVERY_MS
  }

  /** `accountId` null: a change written before ended tokens were per account, which ends that `jti` for every account. */
  add(accountId: string | null, jti: string, expiresAt: number): void {
    const now = this.now()
    if (now >= this.nextSweep) this.sweep(now)
    if (expiresAt > now) this.until.set(endedKey(accountId ?? ANY_ACCOUNT, jti), expiresAt)
  }

  /** Whether the account's token was logged out; an entry past its expiry still answers yes until swept (its token is expired anyway). */
  has(accountId: string, jti: string): boolean {
    return this.until.size > 0 && (this.until.has(endedKey(accountId, jti)) || this.until.has(endedKey(ANY_ACCOUNT, jti)))
  }

  get size(): number {
    return this.until.size
  }

  private sweep(now: number): void {
    for (const [jti, expiresAt] of this.until) if (expiresAt <= now) this.until.delete(jti)
    this.nextSweep = now + SWEEP_EVERY_MS
  }
}
