import { readFileSync } from 'node:fs'
import {
  Server,
  ServerCredentials,
  status as grpcStatusCode,
  type Metadata,
  type ServerInterceptingCall,
  type ServerInterceptingCallInterface,
  type ServerInterceptor,
} from '@grpc/grpc-js'
import type { CheckContext } from '../commands/permissionQueries.js'
import { nextDecisionId } from '../decisionLog/decisionId.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import type { GrpcConfig } from '../config.js'
import type { Account } from '../domain/principals.js'
import type { RouteMap } from '../domain/routeMap.js'
import type { Localizer } from '../i18n/index.js'
import { authzService } from './authzService.js'
import { withCheckRequestDecoder } from './checkRequest.js'
import { extAuthzService } from './extAuthz.js'
import { healthService } from './health.js'
import { loadServiceProtos } from './protos.js'
import { withEncodedAnswers } from './wire.js'
import { grpcError } from './status.js'

/** The largest request message taken, as the HTTP API's body limit; a larger one is RESOURCE_EXHAUSTED before it is decoded. */
export const MAX_RECEIVE_BYTES = 1024 * 1024

export interface GrpcServerOptions {
  config: GrpcConfig
  host: string
  /** A call's request must have arrived whole within this long (REQUEST_TIMEOUT_MS), else DEADLINE_EXCEEDED. */
  requestTimeoutMs: number
  ctx: CheckContext
  routeMap: RouteMap | null
  replica: { isStale: () => boolean; readonly revisionText: string }
  /** The account an `authorization` value admits, by the HTTP routes' rules (the runner passes headerAuthenticator's). */
  authenticate: (header: string | undefined) => Account | Promise<Account>
  localizer: Localizer
  readiness: () => Promise<'ready' | 'unavailable' | 'stale'>
  /** Decision ids; by default this process's own, as HTTP's (one sequence for both front ends). */
  decisionId?: () => string
  /** Where each gateway decision is handed after its evaluation (the decision log, as the HTTP routes'). */
  recorder: DecisionRecorder
  maxReceiveBytes?: number
}

export interface GrpcServer {
  /** The port bound (GRPC_PORT=0 picks a free one). */
  readonly port: number
  /** Stops taking calls, lets those under way finish until the deadline, then cuts what is left. */
  stop(timeoutMs: number): Promise<void>
}

type CallInterface = ServerInterceptingCallInterface
// Neither type is exported by the library's index; both are read off the interface.
type InterceptingServerListener = Parameters<CallInterface['start']>[0]
type PartialStatusObject = Parameters<CallInterface['sendStatus']>[0]

/**
 * A call that is ended when its request does not arrive whole in time: a
 * client that opens a stream and never ends it holds a stream and its
 * buffered bytes, and nothing else in the library bounds that. It is the
 * call's listener too and hands everything straight through: the
 * library's ServerInterceptingCall would build a responder, a listener and
 * a closure per step of every call, for a deadline that needs no more than
 * a place in PendingCalls.
 */
class DeadlineCall implements CallInterface, InterceptingServerListener {
  private listener: InterceptingServerListener | undefined
  /** PendingCalls's links and the time (performance.now()) the request must have arrived by. */
  older: DeadlineCall | null = null
  newer: DeadlineCall | null = null
  pending = false
  due = 0

  constructor(
    private readonly next: CallInterface,
    private readonly calls: PendingCalls,
    private readonly refusal: PartialStatusObject,
  ) {}

  start(listener: InterceptingServerListener): void {
    this.listener = listener
    this.calls.add(this)
    this.next.start(this)
  }

  expire(): void {
    this.next.sendStatus(this.refusal)
  }

  onReceiveMetadata(metadata: Metadata): void {
    this.listener?.onReceiveMetadata(metadata)
  }
  onReceiveMessage(message: unknown): void {
    this.listener?.onReceiveMessage(message)
  }
  onReceiveHalfClose(): void {
    this.calls.remove(this)
    this.listener?.onReceiveHalfClose()
  }
  onCancel(): void {
    this.calls.remove(this)
    this.listener?.onCancel()
  }

  sendMetadata(metadata: Metadata): void {
    this.next.sendMetadata(metadata)
  }
  sendMessage(message: unknown, callback: () => void): void {
    this.next.sendMessage(message, callback)
  }
  sendStatus(status: PartialStatusObject): void {
    this.next.sendStatus(status)
  }
  startRead(): void {
    this.next.startRead()
  }
  getPeer(): string {
    return this.next.getPeer()
  }
  getDeadline(): ReturnType<CallInterface['getDeadline']> {
    return this.next.getDeadline()
  }
  getHost(): string {
    return this.next.getHost()
  }
  getAuthContext(): ReturnType<CallInterface['getAuthContext']> {
    return this.next.getAuthContext()
  }
  getConnectionInfo(): ReturnType<CallInterface['getConnectionInfo']> {
    return this.next.getConnectionInfo()
  }
  getMetricsRecorder(): ReturnType<CallInterface['getMetricsRecorder']> {
    return this.next.getMetricsRecorder()
  }
}

/**
 * The calls whose request has not arrived whole yet, oldest first. All
 * have the same time limit, so they are due in the order they began, and
 * one timer, set for the oldest, serves them all: a timer of its own set
 * and cleared for every call cost more CPU than the rest of the deadline.
 */
class PendingCalls {
  private oldest: DeadlineCall | null = null
  private newest: DeadlineCall | null = null
  private timer: NodeJS.Timeout | undefined

  constructor(private readonly timeoutMs: number) {}

  add(call: DeadlineCall): void {
    call.due = performance.now() + this.timeoutMs
    call.pending = true
    call.older = this.newest
    call.newer = null
    if (this.newest === null) this.oldest = call
    else this.newest.newer = call
    this.newest = call
    this.timer ??= this.wake(this.timeoutMs)
  }

  /**
   * Not holding the process open: a pending call's stream does, and the
   * timer may outlive the last call (it is not cleared when none is left).
   */
  private wake(ms: number): NodeJS.Timeout {
    return setTimeout(sweep, ms, this).unref()
  }

  remove(call: DeadlineCall): void {
    if (!call.pending) return
    call.pending = false
    if (call.older === null) this.oldest = call.newer
    else call.older.newer = call.newer
    if (call.newer === null) this.newest = call.older
    else call.newer.older = call.older
    call.older = null
    call.newer = null
  }

  /** Ends the calls now due, and sets the timer again for the oldest left. */
  sweep(): void {
    this.timer = undefined
    const now = performance.now()
    while (this.oldest !== null && this.oldest.due <= now) {
      const call = this.oldest
      this.remove(call)
      call.expire()
    }
    if (this.oldest !== null) this.timer = this.wake(this.oldest.due - now)
  }
}

function sweep(calls: PendingCalls): void {
  calls.sweep()
}

/** Ends a call whose request has not arrived whole within `timeoutMs` with DEADLINE_EXCEEDED. */
function requestDeadline(timeoutMs: number, localizer: Localizer): ServerInterceptor {
  const refusal = grpcError('GRPC_REQUEST_TIMEOUT', localizer.translator(localizer.defaultLocale))
  const status: PartialStatusObject = { code: grpcStatusCode.DEADLINE_EXCEEDED, details: refusal.details ?? '', metadata: refusal.metadata ?? null }
  // The library's type names its own class; any ServerInterceptingCallInterface is taken where it is called.
  const calls = new PendingCalls(timeoutMs)
  return (_method, call) => new DeadlineCall(call, calls, status) as unknown as ServerInterceptingCall
}

/** Builds the gRPC server, binds GRPC_PORT (cleartext HTTP/2, or TLS with GRPC_TLS_CERT/KEY) and starts serving. */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const protos = loadServiceProtos()
  const decisionId = options.decisionId ?? nextDecisionId
  const shared = { ...options, decisionId }
  const server = new Server({
    'grpc.max_receive_message_length': options.maxReceiveBytes ?? MAX_RECEIVE_BYTES,
    // Nothing here serves channelz, and keeping its figures costs every call a tracker, clock reads and counters.
    'grpc.enable_channelz': 0,
    interceptors: [requestDeadline(options.requestTimeoutMs, options.localizer)],
  })
  server.addService(withCheckRequestDecoder(withEncodedAnswers(protos.extAuthz, 'Check'), 'Check'), extAuthzService(shared))
  server.addService(withEncodedAnswers(protos.authz, 'CheckBatch'), authzService(shared))
  server.addService(protos.health, healthService({ readiness: options.readiness, services: ['envoy.service.auth.v3.Authorization', 'aps.authz.v1.Authz'] }))
  const { tls } = options.config
  const credentials =
    tls === null
      ? ServerCredentials.createInsecure()
      : ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(tls.certPath), private_key: readFileSync(tls.keyPath) }], false)
  const host = options.host.includes(':') ? `[${options.host}]` : options.host
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${options.config.port}`, credentials, (error, bound) => (error === null ? resolve(bound) : reject(error)))
  })
  return {
    port,
    stop: (timeoutMs) =>
      new Promise<void>((resolve) => {
        const deadline = setTimeout(() => {
          server.forceShutdown()
          resolve()
        }, timeoutMs)
        server.tryShutdown(() => {
          clearTimeout(deadline)
          resolve()
        })
      }),
  }
}
