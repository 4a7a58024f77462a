/** The decision log recorder's pieces that need no database: the events' time, client address and reason. */
import t from 'tap'
import type { DecisionEvent, DecisionSink } from '../../src/decisionLog/event.js'
import { SinkPipeline } from '../../src/decisionLog/pipeline.js'
import { DecisionRecorder, rfc3339Micros } from '../../src/decisionLog/recorder.js'
import type { Account } from '../../src/domain/principals.js'
import { REASON } from '../../src/engine/explain.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { random as seeded } from '../support/seededRandom.js'

onceOnPGlite("the decision log's event time, client address and reason; no database")

/** The time as Date formats it, the microseconds added: what the events carried before the second was kept. */
const byDate = (ms: number): string => {
  const whole = Math.floor(ms)
  return `${new Date(whole).toISOString().slice(0, 23)}${String(Math.floor((ms - whole) * 1000)).padStart(3, '0')}Z`
}

t.test("an event's time is Date's own text with microseconds, across seconds, minutes and days", async (t) => {
  const { next: random } = seeded(32)
  const start = Date.UTC(2026, 10, 27, 23, 59, 58)
  let mismatches = 0
  let ms = start
  for (let i = 0; i < 20_000; i++) {
    // Mostly forward by a fraction of a millisecond, now and then back (another replica's clock, a test's) or far ahead.
    const r = random()
    ms = r < 0.05 ? ms - random() * 5000 : r < 0.06 ? ms + random() * 86_400_000 * 400 : ms + random() * 0.7
    if (rfc3339Micros(ms) !== byDate(ms)) mismatches++
  }
  t.equal(mismatches, 0)
  t.equal(rfc3339Micros(start + 999.5), '2026-11-27T23:59:58.999500Z')
  t.equal(rfc3339Micros(start + 1000), '2026-11-27T23:59:59.000000Z')
  t.equal(rfc3339Micros(start + 2000.5), '2026-11-28T00:00:00.000500Z')
  t.equal(rfc3339Micros(start + 5.25), '2026-11-27T23:59:58.005250Z')
})

t.test("each event's client address is its own request's, however the requests before it came", async (t) => {
  const written: DecisionEvent[] = []
  const sink: DecisionSink = { name: 'memory', write: async (events) => void written.push(...events), close: async () => undefined }
  const pipeline = new SinkPipeline(sink, { capacity: 100, batchEvents: 100, batchDelayMs: 0, writeTimeoutMs: 1000, backoffMs: { first: 10, last: 10 } })
  const recorder = new DecisionRecorder(
    { mode: 'all', allowSample: 1, includeQuery: false, clientIpPrefix: { v4: 24, v6: 48 }, trustProxy: { hops: 1 }, replica: 'r', modelId: 'm' },
    [pipeline],
    { decidingRule: () => ['clerk', 'm1', 'orders', 'read', 'allow'] },
    () => 7,
  )
  const subject = { id: 'u1', principal_type: 'merchant', merchant_id: 'm1', sub_role_code: 'clerk' } as Account
  // The same proxy for the first three, the same header twice, then another peer with no header, then the first again.
  const asked: Array<[string | undefined, string | undefined, string]> = [
    ['10.0.0.1', '203.0.113.9', '203.0.113.0'],
    ['10.0.0.1', '203.0.113.9', '203.0.113.0'],
    ['10.0.0.1', '198.51.100.7', '198.51.100.0'],
    ['::ffff:192.0.2.55', undefined, '192.0.2.0'],
    ['2001:db8:1:2::1', undefined, '2001:db8:1::'],
    [undefined, undefined, ''],
    ['10.0.0.1', '203.0.113.9', '203.0.113.0'],
  ]
  for (const [i, [peer, forwardedFor]] of asked.entries()) {
    recorder.decided('check', `d${i}`, subject, null, 'm1', 'orders', 'read', i % 2 === 0 ? REASON.role : REASON.none, 'req', peer, forwardedFor)
  }
  await recorder.close(Date.now() + 5000)
  t.same(
    written.map((e) => e.client_ip),
    asked.map(([, , expected]) => expected),
  )
  // A reason naming its row carries it; one naming none has no `rule`, as JSON too.
  t.same(written[0]?.reason, { kind: 'role', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] })
  t.equal(JSON.stringify(written[1]?.reason), '{"kind":"none"}')
})
