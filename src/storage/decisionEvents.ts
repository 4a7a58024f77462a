import type { Queryable } from './db.js'

/**
 * What the table needs of a decision event to file it: the columns the list
 * filters on. The decision log's own event type has these fields and more;
 * the whole event is stored as it was given.
 */
export interface DecisionRow {
  decision_id: string
  /** RFC 3339. */
  time: string
  subject: { user_id: string; merchant_id: string | null }
  domain: string
  obj: string
  act: string
  allowed: boolean
}

/**
 * Writes a batch of events in one statement: a column of values per array,
 * unnested into rows, so a batch costs one round trip and one plan whatever
 * its size (the bench compares it with a row of parameters per event).
 */
export async function insertDecisionEvents(q: Queryable, events: readonly DecisionRow[]): Promise<void> {
  if (events.length === 0) return
  const columns = {
    decision_id: [] as string[],
    time: [] as string[],
    user_id: [] as string[],
    merchant_id: [] as (string | null)[],
    domain: [] as string[],
    obj: [] as string[],
    act: [] as string[],
    allowed: [] as boolean[],
    event: [] as string[],
  }
  for (const e of events) {
    columns.decision_id.push(e.decision_id)
    columns.time.push(e.time)
    columns.user_id.push(e.subject.user_id)
    columns.merchant_id.push(e.subject.merchant_id)
    columns.domain.push(e.domain)
    columns.obj.push(e.obj)
    columns.act.push(e.act)
    columns.allowed.push(e.allowed)
    columns.event.push(JSON.stringify(e))
  }
  await q.query(
    `INSERT INTO decision_events (decision_id, time, user_id, merchant_id, domain, obj, act, allowed, event)
     SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::json[])`,
    [
      columns.decision_id,
      columns.time,
      columns.user_id,
      columns.merchant_id,
      columns.domain,
      columns.obj,
      columns.act,
      columns.allowed,
      columns.event,
    ],
  )
}

/**
 * Makes today's and tomorrow's partitions (UTC) and drops the days older
 * than `retentionDays`; safe to run from several servers at once (the
 * function in sql/013_decision_log.sql takes a lock). `today` is for tests.
 */
export async function maintainDecisionPartitions(q: Queryable, retentionDays: number, today?: string): Promise<void> {
  if (today === undefined) await q.query('SELECT decision_events_maintain($1::integer)', [retentionDays])
  else await q.query('SELECT decision_events_maintain($1::integer, $2::date)', [retentionDays, today])
}

/** Where a page starts: strictly older than this (time, decision_id). */
export interface DecisionKey {
  /** RFC 3339 with microseconds, UTC. */
  time: string
  decision_id: string
}

export interface DecisionFilter {
  user_id?: string | undefined
  /** Merchant callers see only decisions about their merchant's users. */
  merchant_id?: string | undefined
  allowed?: boolean | undefined
  obj?: string | undefined
  act?: string | undefined
  domain?: string | undefined
  decision_id?: string | undefined
  /** RFC 3339: from this instant on (inclusive). */
  from?: string | undefined
  /** RFC 3339: before this instant (exclusive). */
  to?: string | undefined
}

/** One listed event as stored, and its place in the keyset order. */
export interface StoredDecision {
  event: Record<string, unknown>
  key: DecisionKey
}

/**
 * Up to `limit` events matching the filter, newest first (time, then
 * decision id, descending), after `after` when given. Only the filters
 * given reach the SQL, so each query is planned for the index it can use.
 */
export async function listDecisionEvents(q: Queryable, filter: DecisionFilter, after: DecisionKey | null, limit: number): Promise<StoredDecision[]> {
  const clauses: string[] = []
  const params: unknown[] = []
  const add = (sql: (at: string) => string, ...values: unknown[]) => {
    params.push(...values)
    clauses.push(sql(`$${params.length - values.length + 1}`))
  }
  for (const column of ['user_id', 'merchant_id', 'allowed', 'obj', 'act', 'domain', 'decision_id'] as const) {
    const value = filter[column]
    if (value !== undefined) add((at) => `${column} = ${at}`, value)
  }
  if (filter.from !== undefined) add((at) => `time >= ${at}::timestamptz`, filter.from)
  if (filter.to !== undefined) add((at) => `time < ${at}::timestamptz`, filter.to)
  if (after !== null) {
    add((at) => `(time, decision_id) < (${at}::timestamptz, $${params.length})`, after.time, after.decision_id)
  }
  params.push(limit)
  const { rows } = await q.query<{ event: Record<string, unknown>; key_time: string; decision_id: string }>(
    `SELECT event, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS key_time, decision_id
       FROM decision_events ${clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : ''}
      ORDER BY time DESC, decision_id DESC
      LIMIT $${params.length}`,
    params,
  )
  return rows.map((r) => ({ event: r.event, key: { time: r.key_time, decision_id: r.decision_id } }))
}
