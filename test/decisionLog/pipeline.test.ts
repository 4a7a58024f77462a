/**
 * A sink's pipeline as openDecisionLog builds it: how many writes a stream
 * sink is asked for, and the timers its writes leave behind. No database.
 */
import { Writable } from 'node:stream'
import t from 'tap'
import type { DecisionEvent, DecisionSink } from '../../src/decisionLog/event.js'
import { SinkPipeline } from '../../src/decisionLog/pipeline.js'
import { openDecisionLog, type DecisionLogSettings } from '../../src/decisionLog/sinks.js'
import { eventually } from '../support/eventually.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the decision log pipeline; no database')

const SETTINGS: DecisionLogSettings = {
  mode: 'all',
  allowSample: 1,
  sinks: [{ kind: 'stdout' }],
  includeQuery: false,
  clientIpPrefix: { v4: 32, v6: 128 },
  bufferEvents: 10_000,
  batchEvents: 500,
  batchBytes: 1024 * 1024,
  batchMs: 1000,
  sinkTimeoutMs: 10_000,
  fileMaxBytes: 1024 * 1024,
  fileMaxFiles: 2,
  retentionDays: 7,
  trustProxy: false,
  replica: 'test',
  modelId: '000000000000',
}

let n = 0
const event = (): DecisionEvent => ({ decision_id: `d-${n++}`, allowed: true }) as DecisionEvent
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

t.test('a stream sink given one event per turn writes them in batches, not one write each', async (t) => {
  let writes = 0
  let lines = 0
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      writes++
      lines += chunk.toString().split('\n').length - 1
      done()
    },
  })
  const recorder = openDecisionLog(SETTINGS, { rules: { decidingRule: () => null }, revision: () => 1, stdout: stream })
  const pipeline = recorder.pipelines[0] as SinkPipeline
  for (let i = 0; i < 20; i++) {
    pipeline.push(event())
    await nextTurn()
  }
  t.ok(await eventually(() => pipeline.logged === 20), 'every event written')
  t.equal(lines, 20, 'one line each')
  t.ok(writes <= 4, `${writes} writes for 20 events arriving a turn apart`)
  await recorder.close(Date.now() + 1000)
})

t.test("a write that settles clears its timeout's timer", async (t) => {
  const WRITE_TIMEOUT_MS = 4321
  const sink: DecisionSink = { name: 'probe', write: async () => undefined, close: async () => undefined }
  const pipeline = new SinkPipeline(sink, { capacity: 100, batchEvents: 1, batchDelayMs: 0, writeTimeoutMs: WRITE_TIMEOUT_MS, backoffMs: { first: 10, last: 10 } })
  const timers: unknown[] = []
  const cleared = new Set<unknown>()
  const { setTimeout: realSet, clearTimeout: realClear } = globalThis
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    const timer = realSet(fn, ms)
    if (ms === WRITE_TIMEOUT_MS) timers.push(timer)
    return timer
  }) as typeof setTimeout
  globalThis.clearTimeout = ((timer: Parameters<typeof clearTimeout>[0]) => {
    cleared.add(timer)
    realClear(timer)
  }) as typeof clearTimeout
  t.teardown(() => {
    globalThis.setTimeout = realSet
    globalThis.clearTimeout = realClear
  })
  for (let i = 0; i < 5; i++) pipeline.push(event())
  t.ok(await eventually(() => pipeline.logged === 5), 'every event written')
  t.equal(timers.length, 5, 'one timeout per write')
  t.ok(
    timers.every((timer) => cleared.has(timer)),
    'every one cleared',
  )
  await pipeline.close(Date.now() + 1000)
})
