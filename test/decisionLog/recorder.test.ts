/** The decision log recorder's pieces that need no database: the events' time. */
import t from 'tap'
import { rfc3339Micros } from '../../src/decisionLog/recorder.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { random as seeded } from '../support/seededRandom.js'

onceOnPGlite("the decision log's event time; no database")

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
