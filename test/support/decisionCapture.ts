/**
 * What the decision log's `stdout` sink writes, caught in a stream, and a
 * test app whose log writes there (the gateway's route map, the settings
 * given).
 */
import { Writable } from 'node:stream'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import type { DecisionEvent } from '../../src/decisionLog/event.js'
import { buildTestApp, buildTestService, type TestApp } from '../helper.js'

/** A stream collecting what the stdout sink writes: the text as written, and the events parsed from it. */
export function captureDecisions(): { stream: Writable; text: () => string; events: () => DecisionEvent[] } {
  let text = ''
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString()
      done()
    },
  })
  return {
    stream,
    text: () => text,
    events: () =>
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as DecisionEvent),
  }
}

/** A test app logging decisions to a captured `stdout` sink. */
export async function appLoggingDecisions(
  t: Parameters<typeof buildTestService>[0],
  env: Record<string, string>,
): Promise<{ ta: TestApp } & ReturnType<typeof captureDecisions>> {
  const captured = captureDecisions()
  const service = await buildTestService(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP, DECISION_LOG_SINKS: 'stdout', ...env }, decisionLog: { stdout: captured.stream } })
  return { ta: await buildTestApp(t, { service }), ...captured }
}
