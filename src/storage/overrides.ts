import type { Queryable } from './db.js'

export type Effect = 'allow' | 'deny'

export interface OverrideRow {
  user_id: string
  domain: string
  obj: string
  act: string
  effect: Effect
}

export async function findOverride(
  q: Queryable,
  key: Omit<OverrideRow, 'effect'>,
): Promise<Effect | null> {
  const { rows } = await q.query<{ effect: Effect }>(
    'SELECT effect FROM permission_overrides WHERE user_id = $1 AND domain = $2 AND obj = $3 AND act = $4',
    [key.user_id, key.domain, key.obj, key.act],
  )
  return rows[0]?.effect ?? null
}

/**
 * Sets the override (insert or replace); returns the effect it had before, or
 * null. The stored row is locked before it is compared, and a missing one is
 * inserted without overwriting: a writer that loses an insert race (another
 * replica setting the same override) reads the winner's row and reports no
 * change, so the change is audited once.
 */
export async function setOverride(tx: Queryable, row: OverrideRow, setBy: string): Promise<Effect | null> {
  const key = [row.user_id, row.domain, row.obj, row.act]
  for (;;) {
    const { rows } = await tx.query<{ effect: Effect }>(
      'SELECT effect FROM permission_overrides WHERE user_id = $1 AND domain = $2 AND obj = $3 AND act = $4 FOR UPDATE',
      key,
    )
    const previous = rows[0]?.effect ?? null
    if (previous === row.effect) return previous
    if (previous !== null) {
      await tx.query(
        'UPDATE permission_overrides SET effect = $5, set_by = $6, set_at = now() WHERE user_id = $1 AND domain = $2 AND obj = $3 AND act = $4',
        [...key, row.effect, setBy],
      )
      return previous
    }
    const { rowCount } = await tx.query(
      `INSERT INTO permission_overrides (user_id, domain, obj, act, effect, set_by) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (user_id, domain, obj, act) DO NOTHING`,
      [...key, row.effect, setBy],
    )
    if (rowCount > 0) return null
    // Another transaction inserted the row first and has committed: read it.
  }
}

/** Removes the override; returns the effect it had, or null when there was none. */
export async function deleteOverride(tx: Queryable, key: Omit<OverrideRow, 'effect'>): Promise<Effect | null> {
  const { rows } = await tx.query<{ effect: Effect }>(
    'DELETE FROM permission_overrides WHERE user_id = $1 AND domain = $2 AND obj = $3 AND act = $4 RETURNING effect',
    [key.user_id, key.domain, key.obj, key.act],
  )
  return rows[0]?.effect ?? null
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
      `SELECT user_id::text AS user_id, domain, obj, act, effect FROM permission_overrides
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
