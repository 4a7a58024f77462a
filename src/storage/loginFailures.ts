import { KNOWN_NETWORK_DAYS, LOGIN_FAILURE_WINDOW_SECONDS, judgeAttempt, type AttemptVerdict, type LoginLimits } from '../domain/loginLimits.js'
import type { Database, Queryable } from './db.js'

/**
 * Expired rows removed per write: bounded work for the attempt that does
 * it, and more than the one row each attempt adds, so a backlog left by a
 * burst of attempts shrinks.
 */
const PRUNE_BATCH = 100

/** The network an address is counted under: itself for IPv4, its /64 for IPv6 (one subscriber's allocation, not one address). */
const network = (address: string): string => `network(set_masklen(${address}, CASE family(${address}) WHEN 4 THEN 32 ELSE 64 END))`

export type LoginAttempt =
  /** The password may be checked; `id` is the attempt's row, counted as a failure until forgotten. */
  | { admitted: true; id: string }
  /** A limit is reached; the oldest failure that keeps it reached leaves the window in this many seconds. */
  | Extract<AttemptVerdict, { admitted: false }>

/**
 * Admits a password check for `email` (any case, with or without an
 * account) from `ip` (an IP address, or null when none could be read)
 * unless the limits of src/domain/loginLimits.ts refuse it. An admitted
 * attempt is recorded as a failure before its password is checked: a count
 * taken first and a failure recorded after the check would let every
 * attempt that arrives while others are being checked (on any server) pass
 * the same count, so a burst would get far more guesses than the limit. A
 * transaction-scoped advisory lock per e-mail orders the count and the
 * insert across servers. Times come from the database's clock, the one
 * every server shares.
 */
export async function admitLoginAttempt(db: Database, email: string, ip: string | null, limits: LoginLimits): Promise<LoginAttempt> {
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':login-failures'), hashtext(lower($1)))", [email])
    // The newest failures, as seconds until each leaves the window: from this address (network), and from all.
    const recent = (sameAddress: boolean, limit: number) =>
      tx.query<{ remaining: number }>(
        `SELECT extract(epoch FROM failed_at - (now() - make_interval(secs => $2)))::float8 AS remaining
           FROM login_failures
          WHERE email = lower($1) AND failed_at > now() - make_interval(secs => $2)
            AND (NOT $5::boolean OR ${network('ip')} IS NOT DISTINCT FROM ${network('$3::inet')})
          ORDER BY failed_at DESC
          LIMIT $4`,
        [email, LOGIN_FAILURE_WINDOW_SECONDS, ip, limit, sameAddress],
      )
    const fromAddress = (await recent(true, limits.perAddress)).rows.map((r) => Number(r.remaining))
    const all = (await recent(false, limits.perAccount)).rows.map((r) => Number(r.remaining))
    const knownNetwork = all.length >= limits.perAccount && ip !== null && (await knownLoginNetwork(tx, email, ip))
    const verdict = judgeAttempt({ fromAddress, all, knownNetwork }, limits)
    if (!verdict.admitted) return verdict
    const inserted = await tx.query<{ id: string }>('INSERT INTO login_failures (email, ip) VALUES (lower($1), $2::inet) RETURNING id::text AS id', [email, ip])
    await pruneLoginFailures(tx)
    const id = inserted.rows[0]?.id
    if (id === undefined) throw new Error('INSERT … RETURNING returned no row')
    return { admitted: true, id }
  })
}

async function knownLoginNetwork(q: Queryable, email: string, ip: string): Promise<boolean> {
  const { rows } = await q.query<{ known: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM login_successes
                     WHERE email = lower($1) AND network = ${network('$2::inet')} AND succeeded_at > now() - make_interval(days => $3)) AS known`,
    [email, ip, KNOWN_NETWORK_DAYS],
  )
  return rows[0]?.known === true
}

/**
 * The attempt succeeded: it is not a failure, and its network becomes one
 * the account is known to log in from. Earlier failures stay: they were
 * guesses, and clearing them would give a guesser sharing the owner's
 * address a fresh budget every time the owner logs in.
 */
export async function recordLoginSuccess(db: Database, attemptId: string, email: string, ip: string | null): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('DELETE FROM login_failures WHERE id = $1', [attemptId])
    if (ip === null) return
    await tx.query(
      `INSERT INTO login_successes (email, network) VALUES (lower($1), ${network('$2::inet')})
       ON CONFLICT (email, network) DO UPDATE SET succeeded_at = now()`,
      [email, ip],
    )
    await tx.query(
      `DELETE FROM login_successes WHERE (email, network) IN (
         SELECT email, network FROM login_successes WHERE succeeded_at <= now() - make_interval(days => $1) ORDER BY succeeded_at LIMIT $2)`,
      [KNOWN_NETWORK_DAYS, PRUNE_BATCH],
    )
  })
}

/** The account's password was replaced: failures against the old one count for nothing, from any address. */
export async function clearLoginFailures(q: Queryable, email: string): Promise<void> {
  await q.query('DELETE FROM login_failures WHERE email = lower($1)', [email])
}

/** Rows that left the window count for nothing; the oldest go first, a bounded batch at a time. */
async function pruneLoginFailures(q: Queryable): Promise<void> {
  await q.query(
    `DELETE FROM login_failures WHERE id IN (
       SELECT id FROM login_failures WHERE failed_at <= now() - make_interval(secs => $1) ORDER BY failed_at LIMIT $2)`,
    [LOGIN_FAILURE_WINDOW_SECONDS, PRUNE_BATCH],
  )
}
