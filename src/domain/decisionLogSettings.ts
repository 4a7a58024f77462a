import type { AddressPrefix } from './addressPrefix.js'

/** Where decision events go (DECISION_LOG_SINKS). */
export type DecisionSinkSpec = { kind: 'stdout' } | { kind: 'file'; path: string } | { kind: 'http'; url: string } | { kind: 'postgres' }

/** What is logged: nothing, every deny, or every decision (allows perhaps sampled). */
export type DecisionLogMode = 'off' | 'denies' | 'all'

/** The decision log's settings, as the configuration reads them from DECISION_LOG_*. */
export interface DecisionLogConfig {
  mode: DecisionLogMode
  /** The fraction of allows kept under `all`. */
  allowSample: number
  sinks: DecisionSinkSpec[]
  /** DECISION_LOG_QUERY=true: verify's original path keeps its query. */
  includeQuery: boolean
  /** The leading bits of a client's address kept (DECISION_LOG_CLIENT_IP_PREFIX); all by default. */
  clientIpPrefix: AddressPrefix
  /** Events each sink's buffer holds before the oldest allows, then denies, are dropped. */
  bufferEvents: number
  batchEvents: number
  /** The http sink: uncompressed bytes of one POST, and how long a batch waits to fill up. */
  batchBytes: number
  batchMs: number
  /** A sink's write not settled in this time is retried. */
  sinkTimeoutMs: number
  fileMaxBytes: number
  fileMaxFiles: number
  /** DECISION_LOG_RETENTION_DAYS: days of events the `postgres` sink keeps. */
  retentionDays: number
}
