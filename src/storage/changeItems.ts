import { EVERY_TENANT, audienceOf, type ChangeEvent, type ChangeItem, type ChangeKind } from '../domain/changeItems.js'
import type { Queryable } from './db.js'
import type { Params } from './statement.js'

/** A change as listed: the domain's item (its tenant only filtered on, never listed), its revision, its place within that revision's write, and when it committed. */
export interface ListedChange extends Omit<ChangeItem, 'merchant_id'> {
  revision: number
  index: number
  time: string
}

/** Where a reader is: right after this revision's item at `index`. */
export interface ChangeCursor {
  revision: number
  index: number
}

/** The index of a cursor after the whole of its revision (the largest an integer column holds). */
export const WHOLE_REVISION = 2_147_483_647

/** Whether `item` comes after `cursor`. */
export const isAfter = (item: ChangeCursor, cursor: ChangeCursor): boolean =>
  item.revision > cursor.revision || (item.revision === cursor.revision && item.index > cursor.index)

/**
 * The statement parts that write one revision's items in its writer's
 * transaction (`change_rows AS (...)`), then drop the items older than the
 * retention and remember the newest revision dropped (the horizon), their
 * parameters added to `params`. `retentionDays` 0 keeps only the revision
 * being written. Every writer holds the revision row's lock, so pruning never
 * races itself; the parts share one snapshot, and the pruning never touches
 * the revision written.
 */
export function changeItemsSql(params: Params, revision: number, items: readonly ChangeItem[], retentionDays: number): string[] {
  const at = params.add(revision, '::bigint')
  const days = params.add(retentionDays, '::int')
  const rows = items.map((item) => ({ ...item, audience: audienceOf(item) }))
  return [
    ...(items.length > 0
      ? [
          `change_rows AS (
             INSERT INTO change_items (revision, idx, kind, domain, audience, sub_role, user_id, obj, act, effect, expires_at, event, actor_id)
             SELECT ${at}, ord - 1, x->>'kind', x->>'domain', x->>'audience', x->>'sub_role', x->>'user_id', x->>'obj', x->>'act', x->>'effect',
                    (x->>'expires_at')::timestamptz, x->>'event', x->>'actor_id'
             FROM jsonb_array_elements(${params.add(JSON.stringify(rows), '::jsonb')}) WITH ORDINALITY AS e(x, ord))`,
        ]
      : []),
    `change_rows_gone AS (
       DELETE FROM change_items WHERE revision < ${at} AND (${days} = 0 OR time < now() - make_interval(days => ${days})) RETURNING revision)`,
    `change_horizon_moved AS (
       UPDATE change_horizon SET pruned_through = (SELECT max(revision) FROM change_rows_gone)
       WHERE id = 1 AND (SELECT max(revision) FROM change_rows_gone) > pruned_through)`,
  ]
}

/** The newest revision whose items may have been dropped: a reader must start at or after it. */
export async function readPrunedThrough(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ pruned: string }>('SELECT pruned_through::text AS pruned FROM change_horizon WHERE id = 1')
  return Number(rows[0]?.pruned ?? 0)
}

export interface ChangeFilter {
  /** A merchant's id: its own items and every tenant's; null: everything (system owners). */
  audience: string | null
  domain: string | null
  /** Items up to this revision only (null: whatever is committed). */
  upTo: number | null
}

/** A listed change and who may see it besides system owners (audienceOf). */
export interface AudiencedChange {
  audience: string | null
  item: ListedChange
}

interface StoredItem {
  audience: string | null
  revision: string
  idx: number
  time: Date | string
  kind: ChangeKind
  domain: string
  sub_role: string | null
  user_id: string | null
  obj: string | null
  act: string | null
  effect: 'allow' | 'deny' | null
  expires_at: Date | string | null
  event: ChangeEvent | null
  actor_id: string
}

// `revision` is read as text (a bigint past 2^53 would lose digits as a number): the statements order by the column, `change_items.revision`, not by this text.
const COLUMNS = 'audience, revision::text AS revision, idx, time, kind, domain, sub_role, user_id, obj, act, effect, expires_at, event, actor_id'

/**
 * The conditions of `filter` after a cursor, and their parameters, as one
 * statement per combination of filters: a condition the filter does not set
 * is left out rather than written `$n IS NULL OR …`, so each combination gets
 * a plan of its own (the pkey, or the audience's or the domain's index in
 * revision order; sql/018) instead of one plan for all.
 */
function conditions(cursor: ChangeCursor, filter: ChangeFilter): { where: string; params: unknown[] } {
  const params: unknown[] = [cursor.revision, cursor.index]
  const where = ['(revision, idx) > ($1::bigint, $2::integer)']
  if (filter.audience !== null) where.push(`audience IN ($${params.push(filter.audience)}::text, '${EVERY_TENANT}')`)
  if (filter.domain !== null) where.push(`domain = $${params.push(filter.domain)}::text`)
  if (filter.upTo !== null) where.push(`revision <= $${params.push(filter.upTo)}::bigint`)
  return { where: where.join(' AND '), params }
}

/** The filter of readChangeItems, for changes already read (the stream's live items). */
export function passesFilter(change: AudiencedChange, filter: ChangeFilter): boolean {
  const { audience } = filter
  if (audience !== null && change.audience !== audience && change.audience !== EVERY_TENANT) return false
  if (filter.domain !== null && change.item.domain !== filter.domain) return false
  return filter.upTo === null || change.item.revision <= filter.upTo
}

const instant = (value: Date | string) => (value instanceof Date ? value : new Date(value)).toISOString()

/**
 * The items after `cursor` that `filter` lets through, oldest first: at least
 * `limit` of them when there are, and then the rest of the last revision, so
 * a page never splits a revision.
 */
export async function readChangeItems(q: Queryable, cursor: ChangeCursor, filter: ChangeFilter, limit: number): Promise<AudiencedChange[]> {
  const page = await readItems(q, cursor, filter, limit)
  const last = page[page.length - 1]
  // A full page may stop inside a revision: the rest of that one follows. Its items committed together, so none is still on its way.
  if (page.length < limit || last === undefined) return page
  const rest = await readItems(q, { revision: last.item.revision, index: last.item.index }, { ...filter, upTo: last.item.revision }, null)
  return rest.length === 0 ? page : [...page, ...rest]
}

/** The items after `cursor` that `filter` lets through, oldest first, at most `limit` (null: all). */
async function readItems(q: Queryable, cursor: ChangeCursor, filter: ChangeFilter, limit: number | null): Promise<AudiencedChange[]> {
  const { where, params } = conditions(cursor, filter)
  const bound = limit === null ? '' : ` LIMIT $${params.push(limit)}::integer`
  const { rows } = await q.query<StoredItem>(`SELECT ${COLUMNS} FROM change_items WHERE ${where} ORDER BY change_items.revision, idx${bound}`, params)
  return rows.map((row) => ({ audience: row.audience, item: listed(row) }))
}

function listed(row: StoredItem): ListedChange {
  return {
    revision: Number(row.revision),
    index: row.idx,
    time: instant(row.time),
    kind: row.kind,
    domain: row.domain,
    ...(row.sub_role !== null ? { sub_role: row.sub_role } : {}),
    ...(row.user_id !== null ? { user_id: row.user_id } : {}),
    ...(row.obj !== null ? { obj: row.obj } : {}),
    ...(row.act !== null ? { act: row.act } : {}),
    ...(row.effect !== null ? { effect: row.effect } : {}),
    ...(row.expires_at !== null ? { expires_at: instant(row.expires_at) } : {}),
    ...(row.event !== null ? { event: row.event } : {}),
    actor_id: row.actor_id,
  }
}
