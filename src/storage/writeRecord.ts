import type { AuditEntry } from '../domain/audit.js'
import type { ChangeItem } from '../domain/changeItems.js'
import type { StoreChange } from '../domain/changes.js'
import { auditRowsSql, chainAudit, insertChained, takeAuditIds } from './audit.js'
import { recordBulkWrite, takesBulk } from './bulkWrite.js'
import { changeItemsSql } from './changeItems.js'
import { feedRowSql, notifySql } from './changes.js'
import type { Queryable } from './db.js'
import { revisionRowSql } from './revision.js'
import { Params, withParts } from './statement.js'

/** What a write's transaction records once its rows are written. */
export interface WriteRecord {
  /** The revision it makes: the one LOCK_REVISION read, plus one. */
  revision: number
  /** The audit chain's head LOCK_REVISION read. */
  head: string
  /** Its change-feed row's id: an unanswered COMMIT is settled by it. */
  writeId: string
  audit: readonly AuditEntry[]
  /** Audit ids the transaction already took under its lock (writeRoleRowsTakingAuditIds), ascending; used when there are enough of them. */
  auditIds?: readonly string[] | undefined
  changes: readonly StoreChange[]
  items: readonly ChangeItem[]
  /** CHANGE_RETENTION_DAYS */
  retentionDays: number
}

/**
 * Records a write in the transaction that locked the revision row (with
 * LOCK_REVISION): its audit rows chained after the head, the revision and
 * the chain's new head, its change-feed row and notification, its change
 * stream items and their pruning. Two round trips for an ordinary write (the
 * audit ids unless given, then one statement of parts); a list of more audit rows than
 * one statement takes inserts its first ones alone.
 */
export async function recordWrite(tx: Queryable, record: WriteRecord): Promise<void> {
  // A write of many rows (a policy import) is copied in where the store takes COPY: ./bulkWrite.ts.
  if (takesBulk(tx, record)) return recordBulkWrite(tx, record)
  const taken = record.auditIds !== undefined && record.auditIds.length >= record.audit.length ? record.auditIds.slice(0, record.audit.length) : await takeAuditIds(tx, record.audit.length)
  const chained = chainAudit(record.head, taken, record.audit, new Date())
  const last = chained.parts.pop()
  for (const part of chained.parts) await insertChained(tx, part)
  const params = new Params()
  const parts = [
    ...(last !== undefined ? [auditRowsSql(params, last)] : []),
    revisionRowSql(params, record.revision, chained.head),
    ...feedRowSql(params, record.revision, record.writeId, record.changes),
    ...changeItemsSql(params, record.revision, record.items, record.retentionDays),
  ]
  await tx.query(withParts(parts, notifySql(params, record.revision)), params.values)
}
