import { ServiceError } from '../domain/errors.js'
import { WHOLE_REVISION, readChangeItems, readPrunedThrough, type ChangeCursor, type ChangeFilter, type ListedChange } from '../storage/changeItems.js'
import type { Queryable } from '../storage/db.js'
import { currentRevision } from '../storage/revision.js'
import type { Caller, CommandContext } from './context.js'

export interface ChangesQuery {
  after?: string | undefined
  domain?: string | undefined
  limit?: number | undefined
}

export interface ChangesPage {
  items: ListedChange[]
  next_after: number
  horizon: number
}

export const DEFAULT_CHANGES_LIMIT = 100

const REVISION = /^[0-9]{1,15}$/
const EVENT_ID = /^([0-9]{1,15})\.([0-9]{1,9})$/

/** What a caller may see: a merchant its own tenant and every tenant's items, a system owner everything. */
export function changeFilter(caller: Caller, domain: string | undefined): ChangeFilter {
  const audience = caller.account.principal_type === 'merchant' ? caller.account.merchant_id : null
  return { audience, domain: domain ?? null, upTo: null }
}

/**
 * Where a reader starts: right after the event `Last-Event-ID` names when it
 * sends one, else after the whole revision `after` (0 when absent). Refused
 * when that is past the store's revision (400) or older than what is kept
 * (410, naming the revision to resume after once the policy is read again).
 */
async function startingCursor(q: Queryable, request: { after?: string | undefined; lastEventId?: string | undefined }): Promise<{ cursor: ChangeCursor; head: number; prunedThrough: number }> {
  const [head, prunedThrough] = [await currentRevision(q), await readPrunedThrough(q)]
  let cursor: ChangeCursor
  if (request.lastEventId !== undefined) {
    const match = EVENT_ID.exec(request.lastEventId)
    if (match === null || Number(match[1]) > head) throw new ServiceError('CHANGE_EVENT_ID_INVALID', { id: request.lastEventId.slice(0, 40) })
    cursor = { revision: Number(match[1]), index: Number(match[2]) }
  } else {
    const after = request.after ?? '0'
    if (!REVISION.test(after) || Number(after) > head) throw new ServiceError('CHANGE_REVISION_INVALID', { after: after.slice(0, 40), revision: head })
    cursor = { revision: Number(after), index: WHOLE_REVISION }
  }
  // Resuming inside the newest revision pruned would miss the rest of it.
  const complete = cursor.index === WHOLE_REVISION ? cursor.revision : cursor.revision - 1
  if (complete < prunedThrough) {
    throw new ServiceError('CHANGES_EXPIRED', { after: cursor.revision, revision: head }, undefined, { resume_after: head })
  }
  return { cursor, head, prunedThrough }
}

/**
 * list-changes: the committed changes after `after`, oldest first, from one
 * snapshot. A page that is not full reaches the store's revision, so
 * `next_after` is that revision: a reader moves past revisions it may not
 * see (another tenant's) and never falls behind the horizon for them.
 */
export async function listChanges(ctx: Pick<CommandContext, 'db'>, caller: Caller, query: ChangesQuery): Promise<ChangesPage> {
  const limit = query.limit ?? DEFAULT_CHANGES_LIMIT
  return ctx.db.snapshot(async (tx) => {
    const { cursor, head, prunedThrough } = await startingCursor(tx, { after: query.after })
    const items = (await readChangeItems(tx, cursor, changeFilter(caller, query.domain), limit)).map((c) => c.item)
    const last = items[items.length - 1]
    const nextAfter = items.length >= limit && last !== undefined ? last.revision : head
    return { items, next_after: nextAfter, horizon: prunedThrough + 1 }
  })
}

/** Opening a stream: where it starts, checked as a poll's `after` is; `Last-Event-ID` wins over `after`. */
export async function changeStreamStart(
  ctx: Pick<CommandContext, 'db'>,
  request: { after?: string | undefined; lastEventId?: string | undefined },
): Promise<ChangeCursor> {
  return ctx.db.snapshot(async (tx) => (await startingCursor(tx, request)).cursor)
}
