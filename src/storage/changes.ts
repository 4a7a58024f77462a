import type { StoreChange } from '../domain/changes.js'
import type { Queryable } from './db.js'

/** The channel replicas LISTEN on; the payload is `<schema>:<revision>` (one database may hold several schemas). */
export const CHANGE_CHANNEL = 'aps_changes'

/** How many revisions the feed keeps; a replica further behind than this reloads everything. */
const CHANGES_KEPT = 100_000
/** Pruning runs on one write in this many. */
const PRUNE_EVERY = 1000

export interface ChangeRow {
  revision: number
  changes: StoreChange[]
}

/**
 * Records what the write at `revision` changed and tells listening replicas,
 * in the writer's transaction: the notification is delivered only if the
 * transaction commits. Every so often, drops revisions no replica should need.
 */
export async function recordChange(tx: Queryable, revision: number, writeId: string, changes: readonly StoreChange[]): Promise<void> {
  await tx.query('INSERT INTO store_changes (revision, write_id, changes) VALUES ($1, $2, $3::jsonb)', [
    revision,
    writeId,
    JSON.stringify(changes),
  ])
  await tx.query("SELECT pg_notify($1, current_schema() || ':' || $2)", [CHANGE_CHANNEL, String(revision)])
  if (revision % PRUNE_EVERY === 0) await tx.query('DELETE FROM store_changes WHERE revision <= $1', [revision - CHANGES_KEPT])
}

/** The changes after `revision`, oldest first, at most `limit` of them. */
export async function readChangesAfter(q: Queryable, revision: number, limit = 1000): Promise<ChangeRow[]> {
  const { rows } = await q.query<{ revision: string; changes: StoreChange[] | string }>(
    'SELECT revision::text AS revision, changes FROM store_changes WHERE revision > $1 ORDER BY revision LIMIT $2',
    [revision, limit],
  )
  return rows.map((row) => ({
    revision: Number(row.revision),
    changes: typeof row.changes === 'string' ? (JSON.parse(row.changes) as StoreChange[]) : row.changes,
  }))
}

/**
 * The revisions that follow `revision` in the feed, in order and without a
 * hole, at most `limit` of them; null when the feed no longer holds
 * `revision + 1` (pruned past it), so the reader must load everything again.
 * Asked only by a reader behind the current revision, which the next
 * revision's row therefore exists for (it commits with the revision).
 */
export async function readFeedAfter(q: Queryable, revision: number, limit: number): Promise<ChangeRow[] | null> {
  const rows = await readChangesAfter(q, revision, limit)
  if (rows[0]?.revision !== revision + 1) return null
  const gap = rows.findIndex((row, i) => row.revision !== revision + 1 + i)
  return gap === -1 ? rows : rows.slice(0, gap)
}

/** Whether the write with this id committed (asked after its COMMIT went unanswered). */
export async function writeCommitted(q: Queryable, writeId: string): Promise<number | null> {
  const { rows } = await q.query<{ revision: string }>('SELECT revision::text AS revision FROM store_changes WHERE write_id = $1', [writeId])
  return rows[0] === undefined ? null : Number(rows[0].revision)
}

export async function currentSchema(q: Queryable): Promise<string> {
  const { rows } = await q.query<{ schema: string }>('SELECT current_schema() AS schema')
  return rows[0]?.schema ?? 'public'
}
