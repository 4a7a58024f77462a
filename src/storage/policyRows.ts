import type { Queryable } from './db.js'

/** Rows of the standard `casbin_rule` table: `p` grants and `g` role assignments. */
export type PolicyType = 'p' | 'g'

const FIELD_COUNT = 6

function padded(values: readonly string[]): string[] {
  if (values.length > FIELD_COUNT) throw new Error(`a policy rule has at most ${FIELD_COUNT} fields`)
  return [...values, ...Array<string>(FIELD_COUNT - values.length).fill('')]
}

/** Inserts the rule; false when it was already stored. */
export async function insertRule(tx: Queryable, ptype: PolicyType, values: readonly string[]): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4, v5) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (ptype, v0, v1, v2, v3, v4, v5) DO NOTHING`,
    [ptype, ...padded(values)],
  )
  return rowCount > 0
}

/** Deletes exactly the rule given (no patterns); false when it was not stored. */
export async function deleteRule(tx: Queryable, ptype: PolicyType, values: readonly string[]): Promise<boolean> {
  const { rowCount } = await tx.query(
    `DELETE FROM casbin_rule WHERE ptype = $1 AND v0 = $2 AND v1 = $3 AND v2 = $4 AND v3 = $5 AND v4 = $6 AND v5 = $7`,
    [ptype, ...padded(values)],
  )
  return rowCount > 0
}

export interface RuleRow {
  ptype: string
  fields: string[]
}

/** Only the fields the model declares, without the empty padding (one array per row, no intermediate ones). */
function trimmed(row: Record<string, string | null>): string[] {
  const { v0, v1, v2, v3, v4, v5 } = row
  const end = v5 ? 6 : v4 ? 5 : v3 ? 4 : v2 ? 3 : v1 ? 2 : v0 ? 1 : 0
  const fields = [v0 ?? '', v1 ?? '', v2 ?? '', v3 ?? '', v4 ?? '', v5 ?? '']
  fields.length = end
  return fields
}

/**
 * Streams `casbin_rule` in id order a page at a time. With `domain`, only the
 * p and g rows of that domain and of `global`: exactly what the model reads to
 * decide in that domain (platform staff reach their roles through `global`).
 */
export async function* iterateRules(
  q: Queryable,
  options: { domain?: string; pageSize?: number } = {},
): AsyncGenerator<RuleRow> {
  const pageSize = options.pageSize ?? 10000
  const filter =
    options.domain === undefined
      ? ''
      : "AND ((ptype = 'p' AND v1 IN ($3, 'global')) OR (ptype = 'g' AND v2 IN ($3, 'global')))"
  let after = '0'
  for (;;) {
    const params: unknown[] = [after, pageSize]
    if (options.domain !== undefined) params.push(options.domain)
    const { rows } = await q.query<Record<string, string | null>>(
      `SELECT id::text AS id, ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule
       WHERE casbin_rule.id > $1::bigint ${filter} ORDER BY casbin_rule.id LIMIT $2`,
      params,
    )
    for (const row of rows) yield { ptype: row.ptype ?? '', fields: trimmed(row) }
    const last = rows[rows.length - 1]
    if (rows.length < pageSize || last === undefined) return
    after = last.id ?? after
  }
}
