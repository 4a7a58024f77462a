/**
 * npm run bench:decision-log (needs DATABASE_URL=postgres://…): the
 * `postgres` decision sink and the decisions list.
 *
 * 1. One batch of 1,000 events written as the sink writes it (a column per
 *    array, unnested) and as one multi-row VALUES statement.
 * 2. The sink's ceiling: batches of 2,000 written back to back.
 * 3. Sustained: events offered at BENCH_DECISION_RATE a second (10,000) into
 *    a bounded buffer (100,000; what does not fit is counted as dropped)
 *    drained by the sink, while a server process answers checks under
 *    autocannon: events written a second, drops, the deepest the buffer got.
 * 4. The list at BENCH_DECISION_ROWS stored events (10 million) over seven
 *    days: a page by user, by user and denies, the next page by cursor, by
 *    merchant, unfiltered, and one decision id, with the by-user plan.
 */
import { randomUUID } from 'node:crypto'
import type { DecisionEvent } from '../src/decisionLog/event.js'
import { postgresDecisionSink } from '../src/decisionLog/postgresSink.js'
import { insertDecisionEvents, listDecisionEvents, maintainDecisionPartitions, type DecisionFilter } from '../src/storage/decisionEvents.js'
import type { Database } from '../src/storage/db.js'
import { migrate } from '../src/storage/migrate.js'
import { load, median, spawnServer } from './http.js'
import { benchDatabase, postgresUrl } from './seed.js'

if (postgresUrl === undefined) {
  process.stderr.write('set DATABASE_URL=postgres://… : this measures PostgreSQL\n')
  process.exit(2)
}
const RATE = Number(process.env.BENCH_DECISION_RATE ?? 10_000)
const SECONDS = Number(process.env.BENCH_DECISION_SECONDS ?? 10)
const ROWS = Number(process.env.BENCH_DECISION_ROWS ?? 10_000_000)
const BUFFER = 100_000
const BATCH = 2_000
const DAY_MS = 86_400_000

const lines: string[] = [`command: DATABASE_URL=postgres://… BENCH_DECISION_ROWS=${ROWS} npm run bench:decision-log`, '']
const say = (...said: string[]) => {
  lines.push(...said)
  for (const line of said) process.stderr.write(`${line}\n`)
}
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

let serial = 0
/** A deny about one of 1,000 users of 100 merchants, with the fields a check's event has. */
function event(at = Date.now()): DecisionEvent {
  serial++
  const user = serial % 1000
  return {
    decision_id: `${randomUUID()}`,
    time: new Date(at).toISOString().replace('Z', '000Z'),
    source: 'check',
    subject: { user_id: `00000000-0000-4000-8000-${String(user).padStart(12, '0')}`, principal_type: 'merchant', merchant_id: `m${user % 100}`, sub_role_code: 'clerk' },
    domain: `m${user % 100}`,
    obj: 'orders',
    act: 'refund',
    allowed: false,
    reason: { kind: 'none' },
    policy_revision: 1200,
    model_id: '5f2c0e9a7b41',
    replica: 'bench-1',
    request_id: `req-${serial}`,
    client_ip: '10.1.2.0',
  }
}

async function timed(fn: () => Promise<unknown>, runs = 7): Promise<number> {
  await fn()
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const started = performance.now()
    await fn()
    times.push(performance.now() - started)
  }
  return median(times)
}

/** The same batch as one INSERT … VALUES with nine parameters a row. */
async function insertValues(db: Database, events: readonly DecisionEvent[]): Promise<void> {
  const params: unknown[] = []
  const rows = events.map((e) => {
    params.push(e.decision_id, e.time, e.subject.user_id, e.subject.merchant_id, e.domain, e.obj, e.act, e.allowed, JSON.stringify(e))
    const at = params.length - 8
    return `($${at}, $${at + 1}::timestamptz, $${at + 2}, $${at + 3}, $${at + 4}, $${at + 5}, $${at + 6}, $${at + 7}::boolean, $${at + 8}::json)`
  })
  await db.query(`INSERT INTO decision_events (decision_id, time, user_id, merchant_id, domain, obj, act, allowed, event) VALUES ${rows.join(', ')}`, params)
}

const store = await benchDatabase()
const { db } = store
await migrate(db)
const sink = postgresDecisionSink(db, { retentionDays: 7 })

// 1. The two ways of writing one batch.
const thousand = Array.from({ length: 1000 }, () => event())
const unnestMs = await timed(() => insertDecisionEvents(db, thousand.map((e) => ({ ...e, decision_id: randomUUID() }))))
const valuesMs = await timed(() => insertValues(db, thousand.map((e) => ({ ...e, decision_id: randomUUID() }))))
say('| write of 1,000 events | ms (median of 7) | events/s |')
say('|---|---:|---:|')
say(`| unnest arrays (the sink) | ${fmt(unnestMs, 1)} | ${fmt(1000 / (unnestMs / 1000))} |`)
say(`| multi-row VALUES | ${fmt(valuesMs, 1)} | ${fmt(1000 / (valuesMs / 1000))} |`)

// 2. The ceiling: batches back to back for a few seconds.
{
  const batch = Array.from({ length: BATCH }, () => event())
  let written = 0
  const started = performance.now()
  while (performance.now() - started < 5000) {
    await sink.write(batch.map((e) => ({ ...e, decision_id: randomUUID() })))
    written += BATCH
  }
  say('', `sink ceiling, batches of ${fmt(BATCH)} back to back: ${fmt(written / ((performance.now() - started) / 1000))} events/s`)
}

// 3. Sustained at RATE while a server answers checks.
{
  // The check server on an embedded store of its own: the database's work is the sink's alone.
  const { DATABASE_URL: _ignored, ...embedded } = process.env
  const server = await spawnServer('./server.ts', ['1000'], [], embedded)
  const buffer: DecisionEvent[] = []
  let offered = 0
  let dropped = 0
  let written = 0
  let deepest = 0
  let producing = true
  const started = performance.now()
  // Every 10 ms, the events due since the start: a steady offer whatever the timer's jitter.
  const producer = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * RATE) - offered
    for (let i = 0; i < due; i++) {
      if (buffer.length >= BUFFER) dropped++
      else buffer.push(event())
    }
    offered += due
    deepest = Math.max(deepest, buffer.length)
  }, 10)
  const writer = (async () => {
    while (producing || buffer.length > 0) {
      if (buffer.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 5))
        continue
      }
      const batch = buffer.splice(0, BATCH)
      await sink.write(batch)
      written += batch.length
    }
  })()
  const checks = await load({ name: 'check', server, path: '/v2/authz/check?obj=orders&act=read', status: 200 }, SECONDS, 16)
  producing = false
  clearInterval(producer)
  const offeredFor = (performance.now() - started) / 1000
  const writtenInOffer = written
  await writer
  const drainedAt = (performance.now() - started) / 1000
  await server.stop()
  say(
    '',
    `sustained, ${fmt(RATE)} events/s offered for ${fmt(offeredFor, 1)} s while the server answered ${fmt(checks.rps)} checks/s (p99 ${checks.p99} ms):`,
    `  offered ${fmt(offered)}, written while offered ${fmt(writtenInOffer)} (${fmt(writtenInOffer / offeredFor)} events/s), dropped ${fmt(dropped)}, deepest buffer ${fmt(deepest)}; the rest written ${fmt(drainedAt - offeredFor, 2)} s after the offer stopped`,
  )
}
await sink.close()

// 4. The list at ROWS stored events over the last seven days.
{
  const seeded = performance.now()
  for (let d = 7; d >= 0; d--) await maintainDecisionPartitions(db, 30, new Date(Date.now() - d * DAY_MS).toISOString().slice(0, 10))
  await db.query('TRUNCATE decision_events')
  // 100,000 users over 1,000 merchants, a fifth of the events allows; written in chunks so no one statement runs for minutes.
  const CHUNK = 500_000
  for (let from = 0; from < ROWS; from += CHUNK) {
    await db.query(
      `INSERT INTO decision_events (decision_id, time, user_id, merchant_id, domain, obj, act, allowed, event)
       SELECT id, at, u, m, m, 'orders', 'refund', i % 5 = 0,
              json_build_object('decision_id', id, 'time', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'source', 'check',
                'subject', json_build_object('user_id', u, 'principal_type', 'merchant', 'merchant_id', m, 'sub_role_code', 'clerk'),
                'domain', m, 'obj', 'orders', 'act', 'refund', 'allowed', i % 5 = 0, 'reason', json_build_object('kind', 'none'),
                'policy_revision', 1200, 'model_id', '5f2c0e9a7b41', 'replica', 'bench-1', 'request_id', 'req-' || i, 'client_ip', '10.1.2.0')
         FROM (SELECT i, md5(i::text) AS id, now() - (i * (604800.0 / $2::int)) * interval '1 second' AS at,
                      '00000000-0000-4000-8000-' || lpad((i % 100000)::text, 12, '0') AS u, 'm' || (i % 1000) AS m
                 FROM generate_series($1::int + 1, least($1::int + ${CHUNK}, $2::int)) AS i) AS g`,
      [from, ROWS],
    )
    process.stderr.write(`  seeded ${fmt(Math.min(from + CHUNK, ROWS))}\n`)
  }
  await db.query('ANALYZE decision_events')
  say('', `seeded ${fmt(ROWS)} events over 7 days in ${fmt((performance.now() - seeded) / 1000)} s`)
  const user = '00000000-0000-4000-8000-000000004242'
  const firstPage = await listDecisionEvents(db, { user_id: user }, null, 51)
  const cursor = firstPage[49]?.key ?? null
  const cases: Array<[string, DecisionFilter, typeof cursor]> = [
    ['user_id (first page of 50)', { user_id: user }, null],
    ['user_id, allowed=false', { user_id: user, allowed: false }, null],
    ['user_id, next page by cursor', { user_id: user }, cursor],
    ['user_id of a merchant caller', { user_id: user, merchant_id: 'm242' }, null],
    ['merchant caller (merchant_id)', { merchant_id: 'm242' }, null],
    ['no filter', {}, null],
    ['decision_id', { decision_id: firstPage[3]?.key.decision_id ?? '' }, null],
  ]
  say('', `| list at ${fmt(ROWS)} events | ms (median of 7) | rows |`, '|---|---:|---:|')
  for (const [name, filter, after] of cases) {
    let count = 0
    const ms = await timed(async () => {
      count = (await listDecisionEvents(db, filter, after, 51)).length
    })
    say(`| ${name} | ${fmt(ms, 1)} | ${count} |`)
  }
  const plan = await db.query<{ 'QUERY PLAN': string }>(
    `EXPLAIN (ANALYZE, BUFFERS) SELECT event FROM decision_events WHERE user_id = $1 ORDER BY time DESC, decision_id DESC LIMIT 51`,
    [user],
  )
  say('', 'EXPLAIN ANALYZE (user_id, first page):', ...plan.rows.map((r) => `    ${r['QUERY PLAN']}`))
}
process.stdout.write(`${lines.join('\n')}\n`)
await store.drop()
