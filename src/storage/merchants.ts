import type { Queryable } from './db.js'

export interface MerchantSummary {
  merchant_id: string
  display_name: string
  created_at: Date
  /** Its accounts, active or not. */
  admins: number
}

export async function merchantExists(q: Queryable, id: string): Promise<boolean> {
  const { rows } = await q.query('SELECT 1 FROM merchants WHERE id = $1', [id])
  return rows.length > 0
}

/** Inserts the merchant, named by its id unless `displayName` says otherwise; false when the id is taken. */
export async function insertMerchant(q: Queryable, id: string, displayName: string = id): Promise<boolean> {
  const { rowCount } = await q.query('INSERT INTO merchants (id, display_name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [id, displayName])
  return rowCount > 0
}

/**
 * Merchants by id, optionally those whose id starts with `search` or whose
 * display name contains it, ignoring case (compared as is: `_` and `%` are
 * plain characters).
 */
export async function listMerchants(
  q: Queryable,
  search: string | undefined,
  page: number,
  pageSize: number,
): Promise<{ items: MerchantSummary[]; total: number }> {
  const { rows } = await q.query<MerchantSummary & { total: string }>(
    `SELECT m.id AS merchant_id, coalesce(m.display_name, m.id) AS display_name, m.created_at,
            (SELECT count(*) FROM admin_accounts a WHERE a.merchant_id = m.id)::int AS admins,
            count(*) OVER () AS total
       FROM merchants m
      WHERE $1::text IS NULL OR starts_with(m.id, $1::text) OR strpos(lower(coalesce(m.display_name, m.id)), lower($1::text)) > 0
      ORDER BY m.id LIMIT $2 OFFSET $3`,
    [search ?? null, pageSize, (page - 1) * pageSize],
  )
  return { items: rows.map(({ total: _total, ...item }) => item), total: Number(rows[0]?.total ?? 0) }
}
