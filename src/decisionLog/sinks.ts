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

/** The recorder with a pipeline per configured sink (none when DECISION_LOG is off). */
export function openDecisionLog(settings: DecisionLogSettings, parts: DecisionLogParts): DecisionRecorder {
  const specs = settings.mode === 'off' ? [] : settings.sinks
  const pipelines = specs.map((spec) => {
    // Only the http sink waits to fill a batch: a POST per event would cost the receiver and the network.
    const batchDelayMs = spec.kind === 'http' ? settings.batchMs : 0
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
