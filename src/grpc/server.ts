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
 * a closure per step of every call, for a deadline that needs one timer.
 */
class DeadlineCall implements CallInterface, InterceptingServerListener {
  private timer: NodeJS.Timeout | undefined
  private listener: InterceptingServerListener | undefined

  constructor(
    private readonly next: CallInterface,
    private readonly timeoutMs: number,
    private readonly refusal: PartialStatusObject,
  ) {}

  start(listener: InterceptingServerListener): void {
    this.listener = listener
    this.timer = setTimeout(expire, this.timeoutMs, this)
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
    clearTimeout(this.timer)
    this.listener?.onReceiveHalfClose()
  }
  onCancel(): void {
    clearTimeout(this.timer)
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

function expire(call: DeadlineCall): void {
  call.expire()
}

/** Ends a call whose request has not arrived whole within `timeoutMs` with DEADLINE_EXCEEDED. */
function requestDeadline(timeoutMs: number, localizer: Localizer): ServerInterceptor {
  const refusal = grpcError('GRPC_REQUEST_TIMEOUT', localizer.translator(localizer.defaultLocale))
  const status: PartialStatusObject = { code: grpcStatusCode.DEADLINE_EXCEEDED, details: refusal.details ?? '', metadata: refusal.metadata ?? null }
  // The library's type names its own class; any ServerInterceptingCallInterface is taken where it is called.
  return (_method, call) => new DeadlineCall(call, timeoutMs, status) as unknown as ServerInterceptingCall
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
