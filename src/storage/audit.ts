import type { AuditEntry } from '../domain/audit.js'
import { CHAIN_START, rowHash, type ChainPoint, type ChainedContent, type StoredChainRow } from '../domain/auditChain.js'
import type { Queryable } from './db.js'
import { Params, withParts } from './statement.js'

/** What an entry's row holds, as its hash covers it. */
function chainedRow(id: string, entry: AuditEntry, createdAt: Date): ChainedContent {
  return {
    id,
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
    created_at: createdAt,
  }
}

/** Rows per statement of a multi-row write: well under PostgreSQL's parameter and message limits. */
const AUDIT_ROWS_PER_STATEMENT = 5000

/** The next `count` audit row ids, ascending, as one row after another would have taken them. */
export async function takeAuditIds(tx: Queryable, count: number): Promise<string[]> {
  if (count === 0) return []
  const params = new Params()
  const { rows } = await tx.query<{ id: string }>(withParts([auditIdsSql(params, count)], 'SELECT id FROM audit_ids'), params.values)
  return ascendingIds(rows.map((r) => r.id))
}

/** A statement part (`audit_ids AS (...)`, one text column `id`) taking the next `count` audit row ids. */
export function auditIdsSql(params: Params, count: number): string {
  return `audit_ids AS (SELECT nextval(pg_get_serial_sequence('permission_audit', 'id'))::text AS id FROM generate_series(1, ${params.add(count, '::int')}))`
}

/** Ids as text, in ascending numeric order. */
export function ascendingIds(ids: readonly string[]): string[] {
  return ids
    .map((id) => BigInt(id))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map(String)
}

/** Audit rows ready to insert: one array per column (unnest's input). */
export type AuditColumns = Array<Array<string | null>>

/**
 * `entries` chained after `head` with the ids given (ascending, one each):
 * their rows in parts of AUDIT_ROWS_PER_STATEMENT, and the chain's new head.
 */
export function chainAudit(head: string, ids: readonly string[], entries: readonly AuditEntry[], createdAt: Date): { parts: AuditColumns[]; head: string } {
  const parts: AuditColumns[] = []
  let last = head
  for (let start = 0; start < entries.length; start += AUDIT_ROWS_PER_STATEMENT) {
    const columns: AuditColumns = Array.from({ length: 14 }, () => [])
    for (const [i, entry] of entries.slice(start, start + AUDIT_ROWS_PER_STATEMENT).entries()) {
      const row = chainedRow(ids[start + i] as string, entry, createdAt)
      const hash = rowHash(last, row)
      const values = [row.id, row.action, row.target_type, row.target_id, row.obj, row.act, row.domain, row.merchant_id, row.actor_id, row.actor_type, row.ip, createdAt.toISOString(), last, hash]
      for (const [c, value] of values.entries()) (columns[c] as Array<string | null>).push(value)
      last = hash
    }
    parts.push(columns)
  }
  return { parts, head: last }
}

/** Rows made by chainAudit, inserted in a statement of their own. */
export async function insertChained(tx: Queryable, columns: AuditColumns): Promise<void> {
  const params = new Params()
  await tx.query(withParts([auditRowsSql(params, columns)], 'SELECT 1'), params.values)
}

const AUDIT_COLUMN_TYPES = ['bigint', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'timestamptz', 'text', 'text']

/** A statement part (`audit_rows AS (...)`) inserting rows made by chainAudit. */
export function auditRowsSql(params: Params, columns: AuditColumns): string {
  const arrays = columns.map((column, c) => params.add(column, `::${AUDIT_COLUMN_TYPES[c] ?? 'text'}[]`)).join(', ')
  return `audit_rows AS (
     INSERT INTO permission_audit (id, action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash)
     SELECT * FROM unnest(${arrays}))`
}

export interface AuditFilter {
  target_type?: string | undefined
  target_id?: string | undefined
  action?: string | undefined
  /** Merchant callers see only their merchant's entries. */
  merchant_id?: string | undefined
  actor_id?: string | undefined
  /** Entries at or after this instant. */
  from?: Date | undefined
  /** Entries before this instant. */
  until?: Date | undefined
}

/** A row of the audit log as listed: the chained columns but the merchant, with its sequence number as id. */
export interface AuditItem extends Omit<ChainedContent, 'id' | 'merchant_id'> {
  id: number
}

function where(filter: AuditFilter): { sql: string; params: unknown[] } {
  const clauses: string[] = []
  const params: unknown[] = []
  for (const column of ['target_type', 'target_id', 'action', 'merchant_id', 'actor_id'] as const) {
    const value = filter[column]
    if (value === undefined) continue
    params.push(value)
    clauses.push(`${column} = $${params.length}`)
  }
  if (filter.from !== undefined) {
    params.push(filter.from)
    clauses.push(`created_at >= $${params.length}`)
  }
  if (filter.until !== undefined) {
    params.push(filter.until)
    clauses.push(`created_at < $${params.length}`)
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

const CHAIN_COLUMNS =
  'id::text AS id, action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash'

/**
 * Up to `limit` chain rows after row `afterId` (and up to row `untilId` when
 * given), in id order: a keyset page, as cheap at the millionth row as at
 * the first.
 */
export async function readAuditChainPage(q: Queryable, afterId: string, limit: number, untilId?: string): Promise<StoredChainRow[]> {
  const { rows } = await q.query<StoredChainRow>(
    `SELECT ${CHAIN_COLUMNS} FROM permission_audit
     WHERE permission_audit.id > $1::bigint AND ($3::bigint IS NULL OR permission_audit.id <= $3::bigint)
     ORDER BY permission_audit.id LIMIT $2`,
    [afterId, limit, untilId ?? null],
  )
  return rows
}

/** Streams the chain in id order. */
export async function* iterateAuditChain(q: Queryable, pageSize = 5000): AsyncGenerator<StoredChainRow> {
  let after = '0'
  for (;;) {
    const rows = await readAuditChainPage(q, after, pageSize)
    yield* rows
    const last = rows[rows.length - 1]
    if (rows.length < pageSize || last === undefined) return
    after = last.id
  }
}

/** Where the last verification found the chain whole (the chain's start when none has, or the last one found a problem). */
export async function readAuditCheckpoint(q: Queryable): Promise<ChainPoint> {
  const { rows } = await q.query<{ id: string; hash: string; rows: string }>(
    'SELECT last_id::text AS id, row_hash AS hash, rows::text AS rows FROM audit_checkpoint WHERE id = 1',
  )
  const row = rows[0]
  return row === undefined ? CHAIN_START : { id: row.id, hash: row.hash, rows: Number(row.rows) }
}

/**
 * Moves the checkpoint from `from` to `to`, only if it still says `from`:
 * two verifications that started from the same checkpoint cannot both move
 * it, and one that started before another cleared it cannot put it back.
 * Returns whether it moved.
 */
export async function moveAuditCheckpoint(q: Queryable, from: ChainPoint, to: ChainPoint): Promise<boolean> {
  const { rows } = await q.query(
    `UPDATE audit_checkpoint SET last_id = $3::bigint, row_hash = $4, rows = $5::bigint, verified_at = now()
     WHERE id = 1 AND last_id = $1::bigint AND row_hash = $2 AND $3::bigint > last_id RETURNING id`,
    [from.id, from.hash, to.id, to.hash, to.rows],
  )
  return rows.length === 1
}

/** Back to the chain's start, whatever it said: a problem behind it makes it worthless. */
export async function clearAuditCheckpoint(q: Queryable): Promise<void> {
  await q.query('UPDATE audit_checkpoint SET last_id = 0, row_hash = $1, rows = 0, verified_at = now() WHERE id = 1', [CHAIN_START.hash])
}

/**
 * The chain's head and its last row's id, read together (one statement, one
 * snapshot): a verification walks up to that row, so rows appended while it
 * walks are left for the next one.
 */
export async function auditChainEnd(q: Queryable): Promise<{ head: string; lastId: string }> {
  const { rows } = await q.query<{ head: string; last_id: string }>(
    "SELECT audit_head AS head, COALESCE((SELECT max(id) FROM permission_audit), 0)::text AS last_id FROM store_revision WHERE id = 1",
  )
  const row = rows[0]
  if (row === undefined) throw new Error('store_revision row is missing')
  return { head: row.head, lastId: row.last_id }
}

export async function auditHead(q: Queryable): Promise<string> {
  const { rows } = await q.query<{ head: string }>('SELECT audit_head AS head FROM store_revision WHERE id = 1')
  return rows[0]?.head ?? ''
}
