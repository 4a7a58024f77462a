/** The recording histogram writes exactly what prom-client's own Histogram writes for the same observations. */
import t from 'tap'
import { Histogram, Registry, type Metric } from 'prom-client'
import { LatencyHistogram } from '../../src/http/latencyHistogram.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('an in-memory histogram')

const BOUNDS = [0.001, 0.01, 0.1, 1]
const NAME = 'aps_test_seconds'

t.test('the same text as prom-client for the same observations, and reset empties both', async (t) => {
  const ours = new Registry()
  const theirs = new Registry()
  const histogram = new LatencyHistogram(NAME, 'help text', BOUNDS)
  ours.registerMetric(histogram as unknown as Metric)
  const reference = new Histogram({ name: NAME, help: 'help text', labelNames: ['route', 'status_code'], buckets: BOUNDS, registers: [theirs] })
  const series = [
    { route: '/a', status_code: '200' },
    { route: '/a', status_code: '403' },
    { route: '/b "quoted"', status_code: '200' },
  ]
  const observers = series.map((labels) => histogram.observer(labels))
  // Values on, below and above every bound.
  const values = [0, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 30]
  values.forEach((value, i) => {
    const which = i % series.length
    observers[which]?.(value)
    reference.observe(series[which] as Record<string, string>, value)
  })
  const text = await ours.metrics()
  t.equal(text, await theirs.metrics())
  t.match(text, /aps_test_seconds_bucket\{le="\+Inf",route="\/a",status_code="200"\} 4/)
  histogram.reset()
  reference.reset()
  for (const labels of series) reference.zero(labels)
  t.equal(await ours.metrics(), await theirs.metrics(), 'after a reset')
})
