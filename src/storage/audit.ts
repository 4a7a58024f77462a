import type { AuditEntry } from '../domain/audit.js'
import { rowHash, type ChainedContent, type StoredChainRow } from '../domain/auditChain.js'
import type { Queryable } from './db.js'

/**
 * Appends one audit row, chained to the head kept on the store's revision
 * row. Callers pass the transaction that already locked that row (every
 * write bumps the revision first), so concurrent writers form one chain.
 */
export async function insertAudit(tx: Queryable, entry: AuditEntry): Promise<void> {
  const { rows } = await tx.query<{ id: string; head: string }>(
    "SELECT nextval(pg_get_serial_sequence('permission_audit', 'id'))::text AS id, audit_head AS head FROM store_revision WHERE id = 1 FOR UPDATE",
  )
  const next = rows[0]
  if (next === undefined) throw new Error('store_revision row is missing')
  const row = {
    id: next.id,
    action: entry.action,
    target_type: entry.target_type,
    target_id: entry.target_id,
    obj: entry.obj,
    act: entry.act,
    domain: entry.domain,
    merchant_id: entry.merchant_id,
    actor_id: entry.actor.id,
    actor_type: entry.actor.type,
    ip: entry.actor.ip,
    created_at: new Date(),
  }
  const hash = rowHash(next.head, row)
  await tx.query(
    `INSERT INTO permission_audit (id, action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash)
     VALUES ($1::bigint, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    [row.id, row.action, row.target_type, row.target_id, row.obj, row.act, row.domain, row.merchant_id, row.actor_id, row.actor_type, row.ip, row.created_at, next.head, hash],
  )
  await tx.query('UPDATE store_revision SET audit_head = $1 WHERE id = 1', [hash])
}

export interface AuditFilter {
  target_type?: string | undefined
  target_id?: string | undefined
  action?: string | undefined
  /** Merchant callers see only their merchant's entries. */
  merchant_id?: string | undefined
}

/** A row of the audit log as listed: the chained columns but the merchant, with its sequence number as id. */
export interface AuditItem extends Omit<ChainedContent, 'id' | 'merchant_id'> {
  id: number
}

function where(filter: AuditFilter): { sql: string; params: unknown[] } {
  const clauses: string[] = []
  const params: unknown[] = []
  for (const column of ['target_type', 'target_id', 'action', 'merchant_id'] as const) {
    const value = filter[column]
    if (value === undefined) continue
    params.push(value)
    clauses.push(`${column} = $${params.length}`)
  }
  return { sql: clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : '', params }
}

/** One page of the audit list, newest first, and the total matching the filter. */
export async function listAudit(
  q: Queryable,
  filter: AuditFilter,
  page: number,
  pageSize: number,
): Promise<{ items: AuditItem[]; total: number }> {
  const { sql, params } = where(filter)
  const [list, count] = await Promise.all([
    q.query<AuditItem & { id: string }>(
      `SELECT id::text AS id, action, target_type, target_id, obj, act, domain, actor_id, actor_type, ip, created_at
       FROM permission_audit ${sql} ORDER BY permission_audit.id DESC LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, pageSize, (page - 1) * pageSize],
    ),
    q.query<{ total: string }>(`SELECT count(*)::text AS total FROM permission_audit ${sql}`, params),
  ])
  const items = list.rows.map((row) => ({ ...row, id: Number(row.id) }))
  return { items, total: Number(count.rows[0]?.total ?? 0) }
}

/** Streams the chain in id order for verification. */
export async function* iterateAuditChain(q: Queryable, pageSize = 5000): AsyncGenerator<StoredChainRow> {
  let after = '0'
  for (;;) {
    const { rows } = await q.query<StoredChainRow>(
      `SELECT id::text AS id, action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash
       FROM permission_audit WHERE permission_audit.id > $1::bigint ORDER BY permission_audit.id LIMIT $2`,
      [after, pageSize],
    )
    yield* rows
    const last = rows[rows.length - 1]
    if (rows.length < pageSize || last === undefined) return
    after = last.id
  }
}

export async function auditHead(q: Queryable): Promise<string> {
  const { rows } = await q.query<{ head: string }>('SELECT audit_head AS head FROM store_revision WHERE id = 1')
  return rows[0]?.head ?? ''
}
