import { audienceOf, type ChangeItem } from '../domain/changeItems.js'
import type { StoreChange } from '../domain/changes.js'
import { chainAudit, type AuditColumns } from './audit.js'
import { changeItemsSql } from './changeItems.js'
import { feedPruneSql, notifySql } from './changes.js'
import type { Queryable } from './db.js'
import { revisionRowSql } from './revision.js'
import { Params, withParts } from './statement.js'
import type { WriteRecord } from './writeRecord.js'

/**
 * A write of more audit rows than this (a policy import) is recorded through
 * COPY where the store takes it: below it, recordWrite's one statement is
 * as quick and a round trip shorter.
 */
export const BULK_AUDIT_ROWS = 5000

/** Rows per chunk handed to a COPY. */
const LINES_PER_CHUNK = 5000

/** Whether recordWrite hands `record` to recordBulkWrite. */
export function takesBulk(tx: Queryable, record: Pick<WriteRecord, 'audit'>): boolean {
  return tx.copyFrom !== undefined && record.audit.length > BULK_AUDIT_ROWS
}

const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }

/** One column in COPY's text format: `\N` for null; a backslash, tab or line end escaped. */
export function copyField(value: string | null | undefined): string {
  if (value === null || value === undefined) return '\\N'
  return /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, (c) => COPY_ESCAPES[c] ?? c) : value
}

/**
 * The next `count` audit ids, ascending, in one step: the sequence moved past
 * them at once. Only a writer holding the revision row's lock takes audit ids
 * (recordWrite), so the range is the one row after another would have taken.
 */
async function takeAuditIdRange(tx: Queryable, count: number): Promise<string[]> {
  const { rows } = await tx.query<{ last: string }>(
    `SELECT setval(pg_get_serial_sequence('permission_audit', 'id'),
                   nextval(pg_get_serial_sequence('permission_audit', 'id')) + $1::bigint - 1)::text AS last`,
    [count],
  )
  const first = BigInt(rows[0]?.last ?? '0') - BigInt(count) + 1n
  return Array.from({ length: count }, (_, i) => String(first + BigInt(i)))
}

/** chainAudit's rows as COPY lines, a chunk per part. */
function* auditLines(parts: readonly AuditColumns[]): Generator<string> {
  for (const columns of parts) {
    const rows = columns[0]?.length ?? 0
    const lines = new Array<string>(rows)
    // Joined by hand: no array per row (map, join) for the collector to clear, a million of them on a large import.
    for (let r = 0; r < rows; r++) {
      let line = ''
      for (let c = 0; c < columns.length; c++) line += (c === 0 ? '' : '\t') + copyField(columns[c]?.[r])
      lines[r] = line
    }
    yield `${lines.join('\n')}\n`
  }
}

/** One revision's change stream items as COPY lines (change_items' columns as changeItemsSql writes them). */
function* itemLines(revision: number, items: readonly ChangeItem[]): Generator<string> {
  for (let start = 0; start < items.length; start += LINES_PER_CHUNK) {
    const lines: string[] = []
    for (const [i, item] of items.slice(start, start + LINES_PER_CHUNK).entries()) {
      const values = [item.kind, item.domain, audienceOf(item), item.sub_role, item.user_id, item.obj, item.act, item.effect, item.expires_at, item.event, item.actor_id]
      lines.push(`${revision}\t${start + i}\t${values.map(copyField).join('\t')}`)
    }
    yield `${lines.join('\n')}\n`
  }
}

/** The feed row as one COPY line, its JSON list written a chunk at a time (the same text JSON.stringify gives the whole list). */
function* feedLine(revision: number, writeId: string, changes: readonly StoreChange[]): Generator<string> {
  yield `${revision}\t${copyField(writeId)}\t[`
  for (let start = 0; start < changes.length; start += LINES_PER_CHUNK) {
    const json = changes
      .slice(start, start + LINES_PER_CHUNK)
      .map((change) => JSON.stringify(change))
      .join(',')
    yield `${start === 0 ? '' : ','}${copyField(json)}`
  }
  yield ']\n'
}

/**
 * recordWrite for a write of many rows, on a store that takes COPY: the same
 * rows (audit ids, chain, feed row, stream items, revision, pruning and
 * notification), with the audit ids taken as one range and the audit rows,
 * stream items and feed row copied in, instead of bound as arrays and one
 * JSON document each.
 */
export async function recordBulkWrite(tx: Queryable, record: WriteRecord): Promise<void> {
  const copyFrom = tx.copyFrom?.bind(tx)
  if (copyFrom === undefined) throw new Error('recordBulkWrite needs a store that takes COPY FROM STDIN')
  const chained = chainAudit(record.head, await takeAuditIdRange(tx, record.audit.length), record.audit, new Date())
  await copyFrom(
    'permission_audit (id, action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash)',
    auditLines(chained.parts),
  )
  if (record.items.length > 0) {
    await copyFrom('change_items (revision, idx, kind, domain, audience, sub_role, user_id, obj, act, effect, expires_at, event, actor_id)', itemLines(record.revision, record.items))
  }
  await copyFrom('store_changes (revision, write_id, changes)', feedLine(record.revision, record.writeId, record.changes))
  const params = new Params()
  const parts = [revisionRowSql(params, record.revision, chained.head), ...feedPruneSql(params, record.revision), ...changeItemsSql(params, record.revision, [], record.retentionDays)]
  await tx.query(withParts(parts, notifySql(params, record.revision)), params.values)
}
