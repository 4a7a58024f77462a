import { ServiceError } from '../domain/errors.js'
import { listDecisionEvents, type DecisionFilter, type DecisionKey } from '../storage/decisionEvents.js'
import type { Caller, CommandContext } from './context.js'

/** The list's filters (a merchant caller's own merchant is added, never asked for) and its page. */
export type DecisionsQuery = Omit<DecisionFilter, 'merchant_id'> & {
  cursor?: string | undefined
  limit?: number | undefined
}

export interface DecisionsPage {
  /** The events as the decision log wrote them. */
  items: Record<string, unknown>[]
  next_cursor: string | null
}

export const DEFAULT_DECISIONS_LIMIT = 50

/** The key's time as the table gives it back: UTC, microseconds. */
const KEY_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

function sameSecond(time: string): boolean {
  const parsed = new Date(time)
  return !Number.isNaN(parsed.getTime()) && parsed.toISOString().slice(0, 19) === time.slice(0, 19)
}

/** A cursor is the last listed event's key, opaque to clients: they page, they do not seek. */
export function encodeDecisionCursor(key: DecisionKey): string {
  return Buffer.from(JSON.stringify([key.time, key.decision_id])).toString('base64url')
}

/** The key a cursor names; a cursor this service did not give is refused with 400 `114`. */
export function decodeDecisionCursor(cursor: string): DecisionKey {
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    throw new ServiceError('DECISION_CURSOR_INVALID')
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw new ServiceError('DECISION_CURSOR_INVALID')
  const [time, id] = parsed as unknown[]
  // The round trip refuses what the pattern lets through and the database would not read (February 31st).
  if (typeof time !== 'string' || !KEY_TIME.test(time) || !sameSecond(time)) throw new ServiceError('DECISION_CURSOR_INVALID')
  if (typeof id !== 'string' || id.length === 0 || id.length > 200) throw new ServiceError('DECISION_CURSOR_INVALID')
  return { time, decision_id: id }
}

/**
 * list-decisions: the logged gateway decisions, newest first, every filter
 * combined with AND, paged by keyset. A merchant caller sees only decisions
 * about its own merchant's users, whatever it filters on.
 */
export async function listDecisions(ctx: Pick<CommandContext, 'db'>, caller: Caller, query: DecisionsQuery): Promise<DecisionsPage> {
  const { cursor, limit = DEFAULT_DECISIONS_LIMIT, ...asked } = query
  const after = cursor === undefined ? null : decodeDecisionCursor(cursor)
  const filter: DecisionFilter = { ...asked }
  if (caller.account.principal_type === 'merchant') filter.merchant_id = caller.account.merchant_id ?? ''
  // One more than the page: whether a next page exists without a second query.
  const rows = await listDecisionEvents(ctx.db, filter, after, limit + 1)
  const page = rows.slice(0, limit)
  const last = page[page.length - 1]
  return { items: page.map((r) => r.event), next_cursor: rows.length > limit && last !== undefined ? encodeDecisionCursor(last.key) : null }
}
