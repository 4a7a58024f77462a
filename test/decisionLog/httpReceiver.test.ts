/**
 * The http sink behind its pipeline against a real receiver (node:http)
 * that fails, answers 429 with Retry-After, is slow or hangs: nothing lost
 * while it keeps up, every drop counted (allows before denies) when it
 * cannot, and the gateway's answers unaffected. No database: the sink and
 * its pipeline alone, then the service over PGlite or PostgreSQL.
 */
import t from 'tap'
import type { DecisionEvent } from '../../src/decisionLog/event.js'
import { httpSink } from '../../src/decisionLog/httpSink.js'
import { SinkPipeline, type PipelineOptions } from '../../src/decisionLog/pipeline.js'
import { buildTestApp } from '../helper.js'
import { decisionReceiver } from '../support/decisionReceiver.js'
import { eventually } from '../support/eventually.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'

const OPTIONS: PipelineOptions = { capacity: 1000, batchEvents: 50, batchDelayMs: 5, writeTimeoutMs: 300, backoffMs: { first: 20, last: 100 } }

let n = 0
const event = (allowed: boolean): DecisionEvent => ({ decision_id: `d-${n++}`, allowed }) as DecisionEvent

t.test('a receiver that fails, then recovers: nothing lost, nothing dropped', async (t) => {
  const receiver = await decisionReceiver(t)
  const pipeline = new SinkPipeline(httpSink(receiver.url, { maxBytes: 4096, timeoutMs: 300 }), OPTIONS)
  receiver.mode = 'fail'
  const sent = Array.from({ length: 200 }, (_, i) => event(i % 3 === 0))
  for (const e of sent) pipeline.push(e)
  t.ok(await eventually(() => receiver.posts >= 3), 'retried')
  receiver.mode = 'ok'
  t.ok(await eventually(() => pipeline.logged === 200))
  t.same(new Set(receiver.events.map((e) => e.decision_id)), new Set(sent.map((e) => e.decision_id)), 'every event arrived')
  t.same(pipeline.dropped, { overflow_allow: 0, overflow_deny: 0, shutdown: 0 })
  t.ok(receiver.bodies.every((body) => Buffer.byteLength(body) <= 4096), 'POSTs within the byte bound')
  await pipeline.close(Date.now() + 1000)
})

t.test('429 with Retry-After: the next try waits as long as asked', async (t) => {
  const receiver = await decisionReceiver(t)
  const pipeline = new SinkPipeline(httpSink(receiver.url, { maxBytes: 65536, timeoutMs: 300 }), OPTIONS)
  receiver.mode = 'busy'
  pipeline.push(event(false))
  t.ok(await eventually(() => receiver.posts === 1))
  receiver.mode = 'ok'
  t.ok(await eventually(() => pipeline.logged === 1))
  const [first = 0, second = 0] = receiver.arrivals
  t.ok(second - first >= 950, `retried after ${second - first} ms (Retry-After: 1)`)
  await pipeline.close(Date.now() + 1000)
})

t.test('a receiver that hangs, or is too slow: drops counted, allows first, and the oldest', async (t) => {
  const receiver = await decisionReceiver(t)
  const pipeline = new SinkPipeline(httpSink(receiver.url, { maxBytes: 65536, timeoutMs: 600 }), { ...OPTIONS, capacity: 10, writeTimeoutMs: 600 })
  receiver.mode = 'hang'
  const denies = Array.from({ length: 8 }, () => event(false))
  const allows = Array.from({ length: 8 }, () => event(true))
  for (const e of [...denies.slice(0, 4), ...allows, ...denies.slice(4)]) pipeline.push(e)
  t.ok(pipeline.depth <= 10, 'the buffer stays bounded')
  t.ok(await eventually(() => receiver.posts >= 2), 'a hung write is given up and tried again')
  const counted = pipeline.dropped.overflow_allow + pipeline.dropped.overflow_deny
  t.equal(counted, 6, 'every drop counted')
  t.equal(pipeline.dropped.overflow_deny, 0, 'allows went first')
  receiver.mode = 'slow'
  t.ok(await eventually(() => pipeline.depth === 0 && pipeline.logged >= 10))
  const got = new Set(receiver.events.map((e) => e.decision_id))
  t.ok(denies.every((e) => got.has(e.decision_id)), 'every deny arrived')
  t.same(
    allows.filter((e) => got.has(e.decision_id)).map((e) => e.decision_id),
    allows.slice(6).map((e) => e.decision_id),
    'the newest allows kept',
  )
  await pipeline.close(Date.now() + 1000)
})

t.test('the stop flushes what it can by its deadline and counts the rest', async (t) => {
  const receiver = await decisionReceiver(t)
  const pipeline = new SinkPipeline(httpSink(receiver.url, { maxBytes: 65536, timeoutMs: 5000 }), { ...OPTIONS, batchDelayMs: 60_000, writeTimeoutMs: 5000 })
  for (let i = 0; i < 5; i++) pipeline.push(event(false))
  const started = Date.now()
  await pipeline.close(Date.now() + 2000)
  t.equal(receiver.events.length, 5, 'a waiting batch is written at once')
  t.ok(Date.now() - started < 1500)
  const hung = await decisionReceiver(t)
  hung.mode = 'hang'
  const stuck = new SinkPipeline(httpSink(hung.url, { maxBytes: 65536, timeoutMs: 5000 }), { ...OPTIONS, writeTimeoutMs: 5000 })
  for (let i = 0; i < 5; i++) stuck.push(event(false))
  const began = Date.now()
  await stuck.close(Date.now() + 500)
  t.ok(Date.now() - began < 1500, 'a hanging receiver does not hold the stop past its deadline')
  t.equal(stuck.dropped.shutdown, 5, 'what it could not write is counted')
})

t.test("a hanging receiver never slows the gateway's answers", async (t) => {
  const receiver = await decisionReceiver(t)
  receiver.mode = 'hang'
  const ta = await buildTestApp(t, { env: { DECISION_LOG: 'all', DECISION_LOG_SINKS: `http:${receiver.url}`, DECISION_LOG_BATCH_MS: '0', DECISION_LOG_BUFFER_EVENTS: '50' } })
  const { authorization, base } = await listeningWithClerk(t, ta)
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${base}/v2/authz/check?obj=orders&act=${i % 2 === 0 ? 'read' : 'refund'}`, { headers: { authorization } })
    t.equal(await res.text(), `{"response_code":"001","response_text":"Success","data":{"allowed":${i % 2 === 0}}}`)
  }
  const [pipeline] = ta.service.decisionLog.pipelines
  t.ok(await eventually(() => (pipeline?.dropped.overflow_allow ?? 0) > 0))
  t.ok((pipeline?.depth ?? 0) <= 50, 'bounded')
  const { overflow_allow: allowsDropped = 0, overflow_deny: deniesDropped = 0 } = pipeline?.dropped ?? {}
  t.ok(allowsDropped > deniesDropped, `allows dropped first (${allowsDropped} allows, ${deniesDropped} denies)`)
})
