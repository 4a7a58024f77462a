import type { Queryable } from './db.js'

export async function merchantExists(q: Queryable, id: string): Promise<boolean> {
  const { rows } = await q.query('SELECT 1 FROM merchants WHERE id = $1', [id])
  return rows.length > 0
}

/** Inserts the merchant; false when the id is taken. */
export async function insertMerchant(q: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await q.query('INSERT INTO merchants (id) VALUES ($1) ON CONFLICT (id) DO NOTHING', [id])
  return rowCount > 0
}
