import type { Effect } from '../domain/policyCsv.js'
import type { Queryable } from './db.js'

export type { Effect }

export interface OverrideRow {
  user_id: string
  domain: string
  obj: string
  act: string
  effect: Effect
  /** When the override stops counting; null or absent: never. */
  expires_at?: Date | null
}

export type OverrideKey = Omit<OverrideRow, 'effect' | 'expires_at'>

/** A stored override as a write found it. */
export interface StoredOverride {
  effect: Effect
  expires_at: Date | null
}

/** What a write did to one override: the row it found (if still in force) and the one it removed for having expired. */
export interface OverrideWrite {
  previous: StoredOverride | null
  expired: StoredOverride | null
}

const sameInstant = (a: Date | null, b: Date | null): boolean => (a === null || b === null ? a === b : a.getTime() === b.getTime())

const KEY_MATCH = 'user_id = $1 AND domain = $2 AND obj = $3 AND act = $4'

/**
 * Locks the override of `key` and removes it when it expired by `now`
 * (every replica has stopped counting it; the sweep may not have run yet):
 * a write then starts from the state the checks see.
 */
async function lockInForce(tx: Queryable, key: OverrideKey, now: Date): Promise<OverrideWrite> {
  const params = [key.user_id, key.domain, key.obj, key.act]
  const { rows } = await tx.query<StoredOverride>(`SELECT effect, expires_at FROM permission_overrides WHERE ${KEY_MATCH} FOR UPDATE`, params)
  const found = rows[0] ?? null
  if (found === null || found.expires_at === null || found.expires_at.getTime() > now.getTime()) return { previous: found, expired: null }
  await tx.query(`DELETE FROM permission_overrides WHERE ${KEY_MATCH}`, params)
  return { previous: null, expired: found }
}

/**
 * Sets the override (insert or replace, with its expiry) and reports what was
 * there. The stored row is locked before it is compared, and a missing one is
 * inserted without overwriting: a writer that loses an insert race (another
 * replica setting the same override) reads the winner's row and reports no
 * change, so the change is audited once.
 */
export async function setOverride(tx: Queryable, row: OverrideRow, setBy: string, now = new Date()): Promise<OverrideWrite> {
  const key = [row.user_id, row.domain, row.obj, row.act]
  const expiresAt = row.expires_at ?? null
  for (;;) {
    const found = await lockInForce(tx, row, now)
    const { previous } = found
    if (previous !== null && previous.effect === row.effect && sameInstant(previous.expires_at, expiresAt)) return found
    if (previous !== null) {
      await tx.query(
        `UPDATE permission_overrides SET effect = $5, expires_at = $6, set_by = $7, set_at = now() WHERE ${KEY_MATCH}`,
        [...key, row.effect, expiresAt, setBy],
      )
      return found
    }
    const { rowCount } = await tx.query(
      `INSERT INTO permission_overrides (user_id, domain, obj, act, effect, expires_at, set_by) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (user_id, domain, obj, act) DO NOTHING`,
      [...key, row.effect, expiresAt, setBy],
    )
    if (rowCount > 0) return found
    // Another transaction inserted the row first and has committed: read it.
  }
}

/** Removes the override; reports the one in force it removed, or the expired one it cleared. */
export async function deleteOverride(tx: Queryable, key: OverrideKey, now = new Date()): Promise<OverrideWrite> {
  const found = await lockInForce(tx, key, now)
  if (found.previous !== null) {
    await tx.query(`DELETE FROM permission_overrides WHERE ${KEY_MATCH}`, [key.user_id, key.domain, key.obj, key.act])
  }
  return found
}

/**
 * Removes every override that expired by `now` and returns them. Replicas
 * racing to sweep the same rows each get only the rows they deleted, so each
 * expiry is audited once.
 */
export async function sweepExpiredOverrides(
  tx: Queryable,
  now: Date,
  limit = 1000,
): Promise<Array<OverrideRow & { expires_at: Date; merchant_id: string | null }>> {
  const { rows } = await tx.query<OverrideRow & { expires_at: Date; merchant_id: string | null }>(
    `DELETE FROM permission_overrides o USING admin_accounts a
     WHERE a.id = o.user_id AND o.expires_at <= $1 AND (o.user_id, o.domain, o.obj, o.act) IN (
       SELECT user_id, domain, obj, act FROM permission_overrides WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
     )
     RETURNING o.user_id::text AS user_id, o.domain, o.obj, o.act, o.effect, o.expires_at, a.merchant_id`,
    [now, limit],
  )
  return rows
}

/** Streams overrides a page at a time; with `domain`, that domain's and `global`'s. */
export async function* iterateOverrides(
  q: Queryable,
  options: { domain?: string; pageSize?: number } = {},
): AsyncGenerator<OverrideRow> {
  const pageSize = options.pageSize ?? 10000
  let after: [string, string, string, string] = ['00000000-0000-0000-0000-000000000000', '', '', '']
  for (;;) {
    const params: unknown[] = [...after, pageSize]
    const filter = options.domain === undefined ? '' : "AND domain IN ($6, 'global')"
    if (options.domain !== undefined) params.push(options.domain)
    const { rows } = await q.query<OverrideRow>(
      `SELECT user_id::text AS user_id, domain, obj, act, effect, expires_at FROM permission_overrides
       WHERE (user_id, domain, obj, act) > ($1::uuid, $2, $3, $4) ${filter}
       ORDER BY permission_overrides.user_id, domain, obj, act LIMIT $5`,
      params,
    )
    yield* rows
    const last = rows[rows.length - 1]
    if (rows.length < pageSize || last === undefined) return
    after = [last.user_id, last.domain, last.obj, last.act]
  }
}
