import type { StoreChange } from '../domain/changes.js'
import type { Queryable } from './db.js'
import type { Params } from './statement.js'

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
 * The statement parts that record what the write at `revision` changed, in
 * the writer's transaction (`feed_row AS (...)`; on one write in PRUNE_EVERY
 * also the revisions no replica should need), parameters added to `params`.
 * notifySql tells listening replicas, delivered only if the transaction commits.
 */
export function feedRowSql(params: Params, revision: number, writeId: string, changes: readonly StoreChange[]): string[] {
  const at = params.add(revision, '::bigint')
  return [
    `feed_row AS (INSERT INTO store_changes (revision, write_id, changes) VALUES (${at}, ${params.add(writeId)}, ${params.add(JSON.stringify(changes), '::jsonb')}))`,
    ...feedPruneSql(params, revision),
  ]
}

/** feedRowSql's pruning alone, for a feed row written otherwise (a COPY). */
export function feedPruneSql(params: Params, revision: number): string[] {
  return revision % PRUNE_EVERY === 0 ? [`feed_pruned AS (DELETE FROM store_changes WHERE revision <= ${params.add(revision - CHANGES_KEPT, '::bigint')})`] : []
}

/** The final select of a write's statement: the notification of `revision`, sent if the transaction commits. */
export function notifySql(params: Params, revision: number): string {
  return `SELECT pg_notify(${params.add(CHANGE_CHANNEL)}, current_schema() || ':' || ${params.add(String(revision))})`
}

/** The changes after `revision`, oldest first, at most `limit` of them. */
export async function readChangesAfter(q: Queryable, revision: number, limit = 1000): Promise<ChangeRow[]> {
  const { rows } = await q.query<StoredChange>(
    'SELECT revision::text AS revision, changes FROM store_changes WHERE revision > $1 ORDER BY revision LIMIT $2',
    [revision, limit],
  )
  return rows.map(changeRow)
}

interface StoredChange {
  revision: string
  changes: StoreChange[] | string
}

const changeRow = (row: StoredChange): ChangeRow => ({
  revision: Number(row.revision),
  changes: typeof row.changes === 'string' ? (JSON.parse(row.changes) as StoreChange[]) : row.changes,
})

/**
 * The store's revision and the revisions that follow `revision` in the feed,
 * read together (one statement, one snapshot, one round trip), in order and
 * without a hole, at most `limit` of them. `rows` is null when the reader is
 * behind and the feed no longer holds `revision + 1` (pruned past it), so the
 * reader must load everything again; every revision up to the head has its
 * row (it commits with the revision) unless pruned.
 */
export async function readFeedAfter(q: Queryable, revision: number, limit: number): Promise<{ head: number; rows: ChangeRow[] | null }> {
  const { rows } = await q.query<{ head: string } & { [K in keyof StoredChange]: StoredChange[K] | null }>(
    `SELECT r.revision::text AS head, c.revision::text AS revision, c.changes
       FROM store_revision r
       LEFT JOIN LATERAL (SELECT revision, changes FROM store_changes WHERE revision > $1 ORDER BY revision LIMIT $2) c ON true
      WHERE r.id = 1
      ORDER BY c.revision`,
    [revision, limit],
  )
  const head = Number(rows[0]?.head ?? 0)
  const feed = rows.flatMap((row) => (row.revision === null || row.changes === null ? [] : [changeRow({ revision: row.revision, changes: row.changes })]))
  if (head <= revision) return { head, rows: [] }
  if (feed[0]?.revision !== revision + 1) return { head, rows: null }
  const gap = feed.findIndex((row, i) => row.revision !== revision + 1 + i)
  return { head, rows: gap === -1 ? feed : feed.slice(0, gap) }
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
