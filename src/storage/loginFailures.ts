import type { Database, Queryable } from './db.js'

/** The per-account login limit counts failures within this sliding window. */
export const LOGIN_FAILURE_WINDOW_SECONDS = 15 * 60

/**
 * Expired rows removed per attempt: bounded work for the attempt that does
 * it, and more than the one row each attempt adds, so a backlog left by a
 * burst of attempts shrinks.
 */
const PRUNE_BATCH = 100

export type LoginAttempt =
  /** The password may be checked; `id` is the attempt's row, counted as a failure until forgotten. */
  | { admitted: true; id: string }
  /** `email` reached the limit; the oldest failure that keeps it there leaves the window in this many seconds. */
  | { admitted: false; retryAfterSeconds: number }

/**
 * Admits a login attempt for `email` (any case, with or without an account)
 * unless `maxFailures` failures for it fall within the window. An admitted
 * attempt is recorded as a failure before its password is checked: a count
 * taken first and a failure recorded after the check would let every attempt
 * that arrives while others are being checked (on any server) pass the same
 * count, so a burst would get far more than `maxFailures` guesses. A
 * transaction-scoped advisory lock per e-mail orders the count and the
 * insert across servers. Times come from the database's clock, the one
 * every server shares.
 */
export async function admitLoginAttempt(db: Database, email: string, maxFailures: number): Promise<LoginAttempt> {
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':login-failures'), hashtext(lower($1)))", [email])
    // The newest `maxFailures` failures: when there are that many, the oldest of them is the one whose expiry lifts the limit.
    const { rows } = await tx.query<{ remaining: number }>(
      `SELECT ceil(extract(epoch FROM failed_at - (now() - make_interval(secs => $2))))::int AS remaining
         FROM login_failures
        WHERE email = lower($1) AND failed_at > now() - make_interval(secs => $2)
        ORDER BY failed_at DESC
        LIMIT $3`,
      [email, LOGIN_FAILURE_WINDOW_SECONDS, maxFailures],
    )
    const limiting = rows.length >= maxFailures ? rows[rows.length - 1] : undefined
    if (limiting !== undefined) return { admitted: false, retryAfterSeconds: Math.max(1, Number(limiting.remaining)) }
    const inserted = await tx.query<{ id: string }>('INSERT INTO login_failures (email) VALUES (lower($1)) RETURNING id::text AS id', [email])
    await pruneLoginFailures(tx)
    const id = inserted.rows[0]?.id
    if (id === undefined) throw new Error('INSERT … RETURNING returned no row')
    return { admitted: true, id }
  })
}

/** The attempt succeeded: it is not a failure. */
export async function forgetLoginAttempt(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM login_failures WHERE id = $1', [id])
}

/** Rows that left the window count for nothing; the oldest go first, a bounded batch at a time. */
async function pruneLoginFailures(q: Queryable): Promise<void> {
  await q.query(
    `DELETE FROM login_failures WHERE id IN (
       SELECT id FROM login_failures WHERE failed_at <= now() - make_interval(secs => $1) ORDER BY failed_at LIMIT $2)`,
    [LOGIN_FAILURE_WINDOW_SECONDS, PRUNE_BATCH],
  )
}
