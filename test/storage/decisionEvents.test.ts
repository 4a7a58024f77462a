/**
 * The decision events' table: one partition per UTC day, made ahead and
 * dropped past retention by a job that several servers may run at once;
 * batched writes; the newest-first keyset listing and its filters.
 */
import t from 'tap'
import type { Database } from '../../src/storage/db.js'
import { insertDecisionEvents, listDecisionEvents, maintainDecisionPartitions, type DecisionRow } from '../../src/storage/decisionEvents.js'
import { migrate } from '../../src/storage/migrate.js'
import { backend, freshDatabase, secondConnection } from '../helper.js'

const USER_A = '11111111-1111-4111-8111-111111111111'
const USER_B = '22222222-2222-4222-8222-222222222222'

function event(id: string, time: string, overrides: Partial<DecisionRow> = {}): DecisionRow {
  return { decision_id: id, time, subject: { user_id: USER_A, merchant_id: 'm1' }, domain: 'm1', obj: 'orders', act: 'read', allowed: false, ...overrides }
}

async function partitions(db: Database): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'decision_events'::regclass ORDER BY 1`,
  )
  return rows.map((r) => r.name)
}

async function inDefault(db: Database): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM decision_events_default')
  return rows[0]?.n ?? -1
}

t.test('the migration makes the partitions of today and tomorrow (UTC)', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const today = new Date()
  const tomorrow = new Date(today.getTime() + 86_400_000)
  const day = (d: Date) => `decision_events_p${d.toISOString().slice(0, 10).replaceAll('-', '')}`
  const names = await partitions(db)
  // Around midnight the migration may have run on the day before: today's partition is there in any case.
  t.ok(names.includes(day(today)), `today's partition among ${names.join(', ')}`)
  await maintainDecisionPartitions(db, 7)
  t.ok((await partitions(db)).includes(day(tomorrow)), "tomorrow's partition")
})

t.test('retention drops whole days, and a day made late takes its rows from the default partition', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await maintainDecisionPartitions(db, 3, '2030-01-01')
  t.ok((await partitions(db)).includes('decision_events_p20300102'))
  // No partition yet for 2030-01-05: the rows wait in the default partition instead of failing.
  await insertDecisionEvents(db, [event('a', '2030-01-01T10:00:00.000001Z'), event('b', '2030-01-05T10:00:00Z'), event('c', '2030-01-05T23:59:59.999999Z')])
  t.equal(await inDefault(db), 2)
  await maintainDecisionPartitions(db, 3, '2030-01-05')
  t.equal(await inDefault(db), 0, 'moved into their day')
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM decision_events_p20300105')
  t.equal(rows[0]?.n, 2)
  let names = await partitions(db)
  t.ok(names.includes('decision_events_p20300102'), 'three days back is kept')
  t.notOk(names.includes('decision_events_p20300101'), 'four days back is dropped')
  t.ok(names.includes('decision_events_p20300106'), 'tomorrow made ahead')
  t.same(
    (await listDecisionEvents(db, {}, null, 10)).map((d) => d.key.decision_id),
    ['c', 'b'],
    "the dropped day's event is gone",
  )
  // Rows of a day long past that sat in the default partition are deleted as well.
  await insertDecisionEvents(db, [event('old', '2029-06-01T00:00:00Z')])
  await maintainDecisionPartitions(db, 3, '2030-01-05')
  t.equal(await inDefault(db), 0)
  names = await partitions(db)
  t.ok(names.includes('decision_events_default'))
})

t.test('two servers maintaining at once both succeed and leave one set of partitions', { skip: backend === 'pglite' && 'one process holds the embedded store' }, async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const other = secondConnection(t, db)
  for (const today of ['2031-03-01', '2031-03-02', '2031-03-09']) {
    await Promise.all([maintainDecisionPartitions(db, 2, today), maintainDecisionPartitions(other, 2, today), maintainDecisionPartitions(db, 2, today)])
  }
  const names = (await partitions(db)).filter((n) => n.startsWith('decision_events_p2031'))
  t.same(names, ['decision_events_p20310309', 'decision_events_p20310310'])
})

t.test('batched insert and the keyset listing with every filter', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await maintainDecisionPartitions(db, 7, '2030-02-01')
  const events: DecisionRow[] = []
  for (let i = 0; i < 30; i++) {
    const second = String(i).padStart(2, '0')
    events.push(
      event(`d${second}`, `2030-02-01T12:00:${second}.000000Z`, {
        subject: { user_id: i % 2 === 0 ? USER_A : USER_B, merchant_id: i % 3 === 0 ? 'm2' : 'm1' },
        allowed: i % 5 === 0,
        obj: i % 4 === 0 ? 'refunds' : 'orders',
      }),
    )
  }
  // Two events in the same microsecond: the decision id orders them.
  events.push(event('d29.1', '2030-02-01T12:00:29.000000Z'), event('d29.0', '2030-02-01T12:00:29.000000Z'))
  await insertDecisionEvents(db, events)
  await insertDecisionEvents(db, [])

  const all = await listDecisionEvents(db, {}, null, 100)
  t.equal(all.length, 32)
  t.same(all.slice(0, 4).map((d) => d.key.decision_id), ['d29.1', 'd29.0', 'd29', 'd28'], 'newest first, then by id')
  t.same(all[0]?.event, events[30], 'the whole event comes back as written')
  t.equal(all[0]?.key.time, '2030-02-01T12:00:29.000000Z')

  // Paging through by keys visits every event once, in order.
  const paged: string[] = []
  let after = null
  for (;;) {
    const page = await listDecisionEvents(db, {}, after, 7)
    paged.push(...page.map((d) => d.key.decision_id))
    if (page.length < 7) break
    after = page[page.length - 1]?.key ?? null
  }
  t.same(paged, all.map((d) => d.key.decision_id))

  const ids = async (filter: Parameters<typeof listDecisionEvents>[1]) => (await listDecisionEvents(db, filter, null, 100)).map((d) => d.key.decision_id)
  t.ok((await ids({ user_id: USER_B })).every((id) => Number(id.slice(1, 3)) % 2 === 1 && !id.includes('.')))
  t.equal((await ids({ user_id: USER_B })).length, 15)
  t.same(await ids({ merchant_id: 'm2' }), ['d27', 'd24', 'd21', 'd18', 'd15', 'd12', 'd09', 'd06', 'd03', 'd00'])
  t.same(await ids({ allowed: true }), ['d25', 'd20', 'd15', 'd10', 'd05', 'd00'])
  t.same(await ids({ obj: 'refunds', act: 'read', domain: 'm1' }), ['d28', 'd24', 'd20', 'd16', 'd12', 'd08', 'd04', 'd00'])
  t.same(await ids({ act: 'refund' }), [])
  t.same(await ids({ domain: 'm2' }), [])
  t.same(await ids({ decision_id: 'd29.0' }), ['d29.0'])
  t.same(await ids({ from: '2030-02-01T12:00:27Z', to: '2030-02-01T12:00:29Z' }), ['d28', 'd27'], 'from inclusive, to exclusive')
  t.same(await ids({ user_id: USER_A, merchant_id: 'm2', allowed: false, from: '2030-02-01T12:00:10Z' }), ['d24', 'd18', 'd12'])
})
