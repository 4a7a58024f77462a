import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client'
import type { Replica } from '../replica/replica.js'
import type { PoolStats } from '../storage/db.js'
import { LatencyHistogram } from './latencyHistogram.js'
import { DROP_REASONS, type SinkPipeline } from '../decisionLog/pipeline.js'

/** Latency buckets for an answer from memory (sub-millisecond) up to a write that waits on the database. */
const LATENCY_BUCKETS = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

export type DecisionEndpoint = 'check' | 'check_batch' | 'verify'

const DECISION_ENDPOINTS: readonly DecisionEndpoint[] = ['check', 'check_batch', 'verify']

/**
 * What an operator alerts on, in Prometheus' text format: request latency
 * per route, decisions by outcome, the applied policy revision and how long
 * ago it was confirmed, reloads, login failures and limits, pool use. What
 * a request records goes into plain numbers read at scrape time, so the
 * decision routes pay a map look-up and a few additions, nothing else.
 */
export class ServiceMetrics {
  readonly registry = new Registry()
  private readonly duration: LatencyHistogram
  private readonly logins: Counter<'outcome'>
  /** Decisions so far per endpoint: [allowed, denied]. */
  private readonly recorders = new Map<string, (statusCode: number, seconds: number) => void>()
  private readonly decisionCounts: Record<DecisionEndpoint, [number, number]> = { check: [0, 0], check_batch: [0, 0], verify: [0, 0] }

  constructor(replica: Replica, poolStats: () => PoolStats | null, decisionLog: { pipelines: readonly SinkPipeline[] } | null = null) {
    collectDefaultMetrics({ register: this.registry, prefix: 'aps_' })
    // prom-client adds gauges named `…_total` (active handles, requests, resources: the sums of the
    // per-type gauges beside them); Prometheus reserves `_total` for counters and promtool refuses them.
    for (const metric of this.registry.getMetricsAsArray()) {
      if (metric instanceof Gauge && metric.name.endsWith('_total')) this.registry.removeSingleMetric(metric.name)
    }
    this.duration = new LatencyHistogram(
      'aps_http_request_duration_seconds',
      'Time from receiving a request to sending its answer, per route, method and status',
      LATENCY_BUCKETS,
    )
    // The registry asks only for name, help, type, get() and reset(); the rest of prom-client's Metric is unused.
    this.registry.registerMetric(this.duration as unknown as Metric)
    const decisionCounts = this.decisionCounts
    new Counter({
      name: 'aps_decisions_total',
      help: 'Gateway decisions answered by the check, check-batch and verify endpoints, by outcome (explanations not counted)',
      labelNames: ['endpoint', 'outcome'],
      registers: [this.registry],
      collect() {
        this.reset()
        for (const endpoint of DECISION_ENDPOINTS) {
          const [allowed, denied] = decisionCounts[endpoint]
          this.inc({ endpoint, outcome: 'allow' }, allowed)
          this.inc({ endpoint, outcome: 'deny' }, denied)
        }
      },
    })
    this.logins = new Counter({
      name: 'aps_logins_total',
      help: 'Login attempts by outcome: success, failure (wrong e-mail or password), limited (429)',
      labelNames: ['outcome'],
      registers: [this.registry],
    })
    new Gauge({
      name: 'aps_policy_revision',
      help: "The store revision this server's memory reflects",
      registers: [this.registry],
      collect() {
        this.set(replica.revision)
      },
    })
    new Gauge({
      name: 'aps_policy_revision_unconfirmed_seconds',
      help: 'Seconds since this server last confirmed its revision against the database (checks fail closed past MAX_STALENESS_MS)',
      registers: [this.registry],
      collect() {
        this.set(replica.lagMs / 1000)
      },
    })
    new Counter({
      name: 'aps_policy_reloads_total',
      help: 'Full reloads of the policy since start (a gap in the change feed, a failed in-place change, an operator)',
      registers: [this.registry],
      collect() {
        this.reset()
        this.inc(replica.reloads)
      },
    })
    new Gauge({
      name: 'aps_db_pool_connections',
      help: 'PostgreSQL pool connections by state (absent on the embedded store)',
      labelNames: ['state'],
      registers: [this.registry],
      collect() {
        const stats = poolStats()
        if (stats === null) return
        this.set({ state: 'total' }, stats.total)
        this.set({ state: 'idle' }, stats.idle)
        this.set({ state: 'waiting' }, stats.waiting)
      },
    })
    if (decisionLog !== null) this.decisionLogMetrics(decisionLog.pipelines)
  }

  /** The decision log's sinks: events written, dropped by reason, write latency, events waiting. */
  private decisionLogMetrics(pipelines: readonly SinkPipeline[]): void {
    // Two sinks of one kind (two files) get their place in DECISION_LOG_SINKS after the name.
    const named = pipelines.map((pipeline, i) => ({
      sink: pipelines.findIndex((other) => other.sink.name === pipeline.sink.name) === i ? pipeline.sink.name : `${pipeline.sink.name}:${i}`,
      pipeline,
    }))
    new Counter({
      name: 'aps_decision_log_events_total',
      help: 'Decision events each sink took',
      labelNames: ['sink'],
      registers: [this.registry],
      collect() {
        this.reset()
        for (const { sink, pipeline } of named) this.inc({ sink }, pipeline.logged)
      },
    })
    new Counter({
      name: 'aps_decision_log_dropped_total',
      help: 'Decision events a sink never took: its buffer full (the oldest allow, else the oldest deny, dropped) or the stop deadline reached',
      labelNames: ['sink', 'reason'],
      registers: [this.registry],
      collect() {
        this.reset()
        for (const { sink, pipeline } of named) for (const reason of DROP_REASONS) this.inc({ sink, reason }, pipeline.dropped[reason])
      },
    })
    new Gauge({
      name: 'aps_decision_log_queue_depth',
      help: 'Decision events waiting for each sink',
      labelNames: ['sink'],
      registers: [this.registry],
      collect() {
        for (const { sink, pipeline } of named) this.set({ sink }, pipeline.depth)
      },
    })
    const writes = new LatencyHistogram('aps_decision_log_sink_write_seconds', 'Time each successful write of a batch to a decision log sink took', LATENCY_BUCKETS)
    // The registry asks only for name, help, type, get() and reset(); the rest of prom-client's Metric is unused.
    this.registry.registerMetric(writes as unknown as Metric)
    for (const { sink, pipeline } of named) pipeline.onWritten = writes.observer({ sink })
  }

  /**
   * The latency recorder of one route and method: its series per status are
   * kept by the status number, made on first use, so a request builds no
   * label string.
   */
  recorder(method: string, route: string): (statusCode: number, seconds: number) => void {
    // One recorder per route and method, whoever asks (the route's hook, the gateway's fast path): one series each.
    const key = `${method} ${route}`
    const known = this.recorders.get(key)
    if (known !== undefined) return known
    const byStatus = new Map<number, (seconds: number) => void>()
    const record = (statusCode: number, seconds: number): void => {
      let observe = byStatus.get(statusCode)
      if (observe === undefined) {
        observe = this.duration.observer({ method, route, status_code: String(statusCode) })
        byStatus.set(statusCode, observe)
      }
      observe(seconds)
    }
    this.recorders.set(key, record)
    return record
  }

  /** Counts decisions of one endpoint and outcome. */
  decision(endpoint: DecisionEndpoint, allowed: boolean, count = 1): void {
    this.decisionCounts[endpoint][allowed ? 0 : 1] += count
  }

  login(outcome: 'success' | 'failure' | 'limited'): void {
    this.logins.labels(outcome).inc()
  }
}
