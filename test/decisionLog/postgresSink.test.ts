/**
 * The `postgres` decision sink: batches land in the partitioned table as
 * written, its maintenance makes the days ahead and applies the retention
 * it was given, and a database that is gone makes a write reject (the
 * pipeline retries and counts), never throw out of the call.
 */
import t from 'tap'
import type { DecisionEvent } from '../../src/decisionLog/event.js'
import { postgresDecisionSink } from '../../src/decisionLog/postgresSink.js'
import type { Database } from '../../src/storage/db.js'
import { listDecisionEvents, maintainDecisionPartitions } from '../../src/storage/decisionEvents.js'
import { migrate } from '../../src/storage/migrate.js'
import { openPGlite } from '../../src/storage/pglite.js'
import { freshDatabase } from '../helper.js'

const DAY_MS = 86_400_000
const dayName = (ms: number) => `decision_events_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`

function sampleEvent(id: string, time: string): DecisionEvent {
  return {
    decision_id: id,
    time,
    source: 'check',
    subject: { user_id: '11111111-1111-4111-8111-111111111111', principal_type: 'merchant', merchant_id: 'm1', sub_role_code: 'clerk' },
    domain: 'm1',
    obj: 'orders',
    act: 'refund',
    allowed: false,
    reason: { kind: 'none' },
    policy_revision: 4,
    model_id: '0123456789ab',
    replica: 'r1',
    request_id: 'req-1',
    client_ip: '192.0.2.0',
  }
}

async function partitions(db: Database): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'decision_events'::regclass",
  )
  return rows.map((r) => r.name)
}

t.test('a batch is written in full and listed back as it was given', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const sink = postgresDecisionSink(db, { retentionDays: 7 })
  t.equal(sink.name, 'postgres')
  const now = Date.now()
  const batch = Array.from({ length: 500 }, (_, i) => sampleEvent(`e${String(i).padStart(4, '0')}`, new Date(now - i).toISOString().replace('Z', '000Z')))
  await sink.write(batch)
  await sink.write([])
  await sink.close()
  const listed = await listDecisionEvents(db, {}, null, 1000)
  t.equal(listed.length, 500)
  t.same(listed[0]?.event, batch[0])
  t.same(listed[499]?.event, batch[499])
})

t.test('the sink makes the days ahead and drops the days past its retention', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const now = Date.now()
  // Partitions of five and two days ago, as an earlier run with a longer retention left them.
  await maintainDecisionPartitions(db, 30, new Date(now - 5 * DAY_MS).toISOString().slice(0, 10))
  await maintainDecisionPartitions(db, 30, new Date(now - 2 * DAY_MS).toISOString().slice(0, 10))
  t.ok((await partitions(db)).includes(dayName(now - 5 * DAY_MS)))
  const sink = postgresDecisionSink(db, { retentionDays: 3 })
  await sink.close()
  const names = await partitions(db)
  t.notOk(names.includes(dayName(now - 5 * DAY_MS)), 'five days back is past a retention of three')
  t.ok(names.includes(dayName(now - 2 * DAY_MS)), 'two days back is kept')
  t.ok(names.includes(dayName(now)) && names.includes(dayName(now + DAY_MS)), 'today and tomorrow are there')
})

t.test('a database that is gone makes a write reject, and close still settles', async (t) => {
  const db = await openPGlite(null)
  await migrate(db)
  const sink = postgresDecisionSink(db, { retentionDays: 7 })
  await db.close()
  await t.rejects(sink.write([sampleEvent('gone', new Date().toISOString())]))
  await sink.close()
})
