import { scopeOf, type CatalogEntry } from '../domain/permissions.js'
import type { Queryable } from './db.js'

/** The stored catalog; each entry's scope is the code's (the table does not keep it: only the code may change it). */
export async function listCatalog(q: Queryable): Promise<CatalogEntry[]> {
  const { rows } = await q.query<Omit<CatalogEntry, 'scope'>>(
    'SELECT obj, act, label, group_name, is_active FROM permission_catalog ORDER BY group_name, obj, act',
  )
  return rows.map((row) => ({ ...row, scope: scopeOf(row) }))
}

export async function insertCatalogEntry(tx: Queryable, entry: Omit<CatalogEntry, 'is_active' | 'scope'>): Promise<void> {
  await tx.query('INSERT INTO permission_catalog (obj, act, label, group_name) VALUES ($1, $2, $3, $4)', [
    entry.obj,
    entry.act,
    entry.label,
    entry.group_name,
  ])
}

export async function updateCatalogEntry(tx: Queryable, entry: Omit<CatalogEntry, 'scope'>): Promise<void> {
  await tx.query(
    'UPDATE permission_catalog SET label = $3, group_name = $4, is_active = $5, updated_at = now() WHERE obj = $1 AND act = $2',
    [entry.obj, entry.act, entry.label, entry.group_name, entry.is_active],
  )
}
