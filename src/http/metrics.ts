import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { Replica } from '../commands/replica.js'
import type { PoolStats } from '../storage/db.js'

/** Latency buckets for an answer from memory (sub-millisecond) up to a write that waits on the database. */
const LATENCY_BUCKETS = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

export type DecisionEndpoint = 'check' | 'check_batch' | 'verify'

interface Observer {
  observe(value: number): void
}
interface Incrementer {
  inc(value?: number): void
}

/**
 * What an operator alerts on, in Prometheus' text format: request latency
 * per route, decisions by outcome, the applied policy revision and how long
 * ago it was confirmed, reloads, login failures and limits, pool use. Every
 * series a request touches is a child made once and kept, so recording a
 * request costs a map look-up and an observation, nothing else.
 */
export class ServiceMetrics {
  readonly registry = new Registry()
  private readonly duration: Histogram<'method' | 'route' | 'status_code'>
  private readonly decisions: Counter<'endpoint' | 'outcome'>
  private readonly logins: Counter<'outcome'>
  private readonly decisionChildren: Record<DecisionEndpoint, { allow: Incrementer; deny: Incrementer }>

  constructor(replica: Replica, poolStats: () => PoolStats | null) {
    collectDefaultMetrics({ register: this.registry, prefix: 'aps_' })
    this.duration = new Histogram({
      name: 'aps_http_request_duration_seconds',
      help: 'Time from receiving a request to sending its answer, per route, method and status',
      labelNames: ['method', 'route', 'status_code'],
      buckets: LATENCY_BUCKETS,
      registers: [this.registry],
    })
    this.decisions = new Counter({
      name: 'aps_decisions_total',
      help: 'Decisions answered by the check, check-batch and verify endpoints, by outcome',
      labelNames: ['endpoint', 'outcome'],
      registers: [this.registry],
    })
    const outcomes = (endpoint: DecisionEndpoint) => ({ allow: this.decisions.labels(endpoint, 'allow'), deny: this.decisions.labels(endpoint, 'deny') })
    this.decisionChildren = { check: outcomes('check'), check_batch: outcomes('check_batch'), verify: outcomes('verify') }
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
    new Gauge({
      name: 'aps_policy_reloads',
      help: 'Full reloads of the policy since start (a gap in the change feed, a failed in-place change, an operator)',
      registers: [this.registry],
      collect() {
        this.set(replica.reloads)
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
  }

  /**
   * The latency recorder of one route and method: its series per status are
   * kept by the status number, made on first use, so a request builds no
   * label string.
   */
  recorder(method: string, route: string): (statusCode: number, seconds: number) => void {
    const byStatus = new Map<number, Observer>()
    return (statusCode, seconds) => {
      let child = byStatus.get(statusCode)
      if (child === undefined) {
        child = this.duration.labels(method, route, String(statusCode))
        byStatus.set(statusCode, child)
      }
      child.observe(seconds)
    }
  }

  /** Counts one decision; the six series (three endpoints, two outcomes) are made once, up front. */
  decision(endpoint: DecisionEndpoint, allowed: boolean, count = 1): void {
    const pair = this.decisionChildren[endpoint]
    ;(allowed ? pair.allow : pair.deny).inc(count)
  }

  login(outcome: 'success' | 'failure' | 'limited'): void {
    this.logins.labels(outcome).inc()
  }
}
