import type { Queryable } from './db.js'

export interface SubRole {
  code: string
  is_root: boolean
}

/** Sub-roles are created on first use, never root. */
export async function ensureSubRole(q: Queryable, code: string): Promise<void> {
  await q.query('INSERT INTO sub_roles (code) VALUES ($1) ON CONFLICT (code) DO NOTHING', [code])
}

export async function listSubRoles(q: Queryable): Promise<SubRole[]> {
  const { rows } = await q.query<SubRole>('SELECT code, is_root FROM sub_roles ORDER BY code')
  return rows
}
