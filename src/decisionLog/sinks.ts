import type { Writable } from 'node:stream'
import type { DecisionLogConfig, DecisionSinkSpec } from '../domain/decisionLogSettings.js'
import type { ProxyTrust } from '../domain/clientIp.js'
import type { DecisionSink, ShadowComparer } from './event.js'
import { httpSink } from './httpSink.js'
import { SinkPipeline } from './pipeline.js'
import { DecisionRecorder } from './recorder.js'
import { fileSink, stdoutSink } from './streamSink.js'

/** The decision log's settings (the configuration's `decisionLog`) with what the process adds. */
export type DecisionLogSettings = DecisionLogConfig & { trustProxy: ProxyTrust; replica: string; modelId: string }

interface Log {
  warn(obj: object, msg?: string): void
  info(obj: object, msg?: string): void
}

export interface DecisionLogParts {
  /** The deciding row of the engine's last decision. */
  rules: { decidingRule(): string[] | null }
  /** The revision the engine's memory reflects. */
  revision: () => number
  shadow?: ShadowComparer | null
  /** The `postgres` sink, over the service's database (its own module). */
  makePostgresSink?: () => DecisionSink
  log?: Log
  /** Where `stdout` writes (tests); the process's standard output by default. */
  stdout?: Writable
}

/** The sink a spec names. */
function openSink(spec: DecisionSinkSpec, settings: DecisionLogSettings, parts: DecisionLogParts): DecisionSink {
  switch (spec.kind) {
    case 'stdout':
      return stdoutSink(parts.stdout)
    case 'file':
      return fileSink(spec.path, { maxBytes: settings.fileMaxBytes, maxFiles: settings.fileMaxFiles })
    case 'http':
      return httpSink(spec.url, { maxBytes: settings.batchBytes, timeoutMs: settings.sinkTimeoutMs })
    case 'postgres':
      if (parts.makePostgresSink === undefined) throw new Error('DECISION_LOG_SINKS: the postgres sink is not available here')
      return parts.makePostgresSink()
  }
}

/**
 * How long the file and stdout sinks wait to fill a batch (DECISION_LOG_BATCH_MS
 * when shorter). The http sink waits the whole DECISION_LOG_BATCH_MS: a POST
 * per event would cost the receiver and the network. A stream sink written at
 * once writes about one event at a time under load (each write settles
 * before the next), and each write of a file is a trip through libuv's
 * thread pool: a few milliseconds' wait makes it one write per batch.
 */
const STREAM_BATCH_MS = 5

/** The recorder with a pipeline per configured sink (none when DECISION_LOG is off). */
export function openDecisionLog(settings: DecisionLogSettings, parts: DecisionLogParts): DecisionRecorder {
  const specs = settings.mode === 'off' ? [] : settings.sinks
  const pipelines = specs.map((spec) => {
    const batchDelayMs = spec.kind === 'http' ? settings.batchMs : spec.kind === 'postgres' ? 0 : Math.min(settings.batchMs, STREAM_BATCH_MS)
    return new SinkPipeline(
      openSink(spec, settings, parts),
      {
        capacity: settings.bufferEvents,
        batchEvents: settings.batchEvents,
        batchDelayMs,
        writeTimeoutMs: settings.sinkTimeoutMs,
        backoffMs: { first: 100, last: 30_000 },
      },
      parts.log ?? null,
    )
  })
  return new DecisionRecorder(
    {
      mode: settings.mode,
      allowSample: settings.allowSample,
      includeQuery: settings.includeQuery,
      clientIpPrefix: settings.clientIpPrefix,
      trustProxy: settings.trustProxy,
      replica: settings.replica,
      modelId: settings.modelId,
    },
    pipelines,
    parts.rules,
    parts.revision,
    parts.shadow ?? null,
  )
}
