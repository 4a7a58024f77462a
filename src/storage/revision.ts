import type { Queryable, Row } from './db.js'
import type { Params } from './statement.js'

/**
 * Locks the store's single revision row and reads it with the audit chain's
 * head: every write's transaction opens with this (sent with its BEGIN), so
 * transactions that touch the same rows in different orders (two replicas'
 * shared transactions) queue on it instead of deadlocking, and the head is
 * known without reading it again. No parameters: it may share BEGIN's message.
 */
export const LOCK_REVISION = 'SELECT revision::text AS revision, audit_head AS head FROM store_revision WHERE id = 1 FOR UPDATE'

/** What LOCK_REVISION read: the revision and the chain's head, both held until the transaction ends. */
export function lockedRevision(rows: readonly Row[]): { revision: number; head: string } {
  const row = rows[0] as { revision: string; head: string } | undefined
  if (row === undefined) throw new Error('store_revision row is missing')
  return { revision: Number(row.revision), head: row.head }
}

/** The revision row's part of a write's statement (`revision_row AS (...)`): the revision after the locked one, and the chain's new head. */
export function revisionRowSql(params: Params, revision: number, head: string): string {
  return `revision_row AS (UPDATE store_revision SET revision = ${params.add(revision, '::bigint')}, audit_head = ${params.add(head)} WHERE id = 1)`
}

/** The store's revision as committed (no lock): what a reader compares its memory with. */
export async function currentRevision(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ revision: string }>('SELECT revision::text AS revision FROM store_revision WHERE id = 1')
  return Number(rows[0]?.revision ?? 0)
}
