/**
 * The open-loop sender of bench/grpc.ts's latency rows, in a process of its
 * own so that its event loop, its garbage collection and its timers are not
 * the bench's (which also reads the servers' CPU time and runs the closed
 * loops):
 *   node --import tsx bench/grpcLoad.ts '<json: port, rate, seconds, channels, token>'
 * Sends ext_authz Checks at `rate` a second for `seconds`, call i due at
 * start + i / rate, round-robin over `channels` connections of their own;
 * each wake of the timer sends every call due by then. Prints one JSON line:
 * the latency of each call from its send to its answer (what a client
 * sees: the client library, the loopback, the server) and from its due
 * time (adding the sender's own lateness, so a stalled sender shows), as
 * p50/p90/p99/max in ms, and the sender's own event-loop delay.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { credentials, type Client, type ServiceClientConstructor } from '@grpc/grpc-js'
import { loadServiceProtos } from '../src/grpc/protos.js'
import { checkRequest, type LatencySpread } from './grpcRequests.js'

interface LoadOptions {
  port: number
  rate: number
  seconds: number
  channels: number
  token: string
  /** Whether every answer must be an allowed one (the service; the bare server answers an empty OK). */
  expectOk: boolean
}

type Check = (request: unknown, callback: (error: Error | null, answer: { status?: { code?: number } }) => void) => void

const options = JSON.parse(process.argv[2] as string) as LoadOptions
const Authorization = (loadServiceProtos().packages.envoy as unknown as { service: { auth: { v3: { Authorization: ServiceClientConstructor } } } }).service.auth.v3.Authorization
// A local subchannel pool per client: each channel opens a connection of its own.
const clients: Client[] = Array.from({ length: options.channels }, () => new Authorization(`127.0.0.1:${options.port}`, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }))
const checks = clients.map((c) => (c as unknown as { Check: Check }).Check.bind(c))
const request = checkRequest(options.token)

function spread(sorted: Float64Array): LatencySpread {
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] as number
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted[sorted.length - 1] as number }
}

function call(check: Check): Promise<void> {
  return new Promise((resolve, reject) =>
    check(request, (error, answer) => {
      if (error !== null) return reject(error)
      if (options.expectOk && (answer.status?.code ?? 0) !== 0) return reject(new Error(`not allowed: ${JSON.stringify(answer)}`))
      resolve()
    }),
  )
}

// Every connection open and every code path warm before the clock starts.
for (let i = 0; i < 200; i++) await Promise.all(checks.map(call))

const total = Math.floor(options.rate * options.seconds)
const fromSend = new Float64Array(total)
const fromDue = new Float64Array(total)
const loop = monitorEventLoopDelay({ resolution: 1 })
loop.enable()
const began = performance.now()
const interval = 1000 / options.rate
await new Promise<void>((resolve, reject) => {
  let sent = 0
  let answered = 0
  const send = (i: number): void => {
    const due = began + i * interval
    const at = performance.now()
    ;(checks[i % checks.length] as Check)(request, (error, answer) => {
      if (error !== null) return reject(error)
      if (options.expectOk && (answer.status?.code ?? 0) !== 0) return reject(new Error(`not allowed: ${JSON.stringify(answer)}`))
      const now = performance.now()
      fromSend[i] = now - at
      fromDue[i] = now - due
      if (++answered === total) resolve()
    })
  }
  const tick = (): void => {
    const due = Math.min(total, Math.floor((performance.now() - began) / interval) + 1)
    for (; sent < due; sent++) send(sent)
    if (sent < total) setTimeout(tick, Math.max(0, began + sent * interval - performance.now()))
  }
  tick()
})
loop.disable()
for (const c of clients) c.close()
process.stdout.write(
  `${JSON.stringify({
    fromSend: spread(fromSend.sort()),
    fromDue: spread(fromDue.sort()),
    senderLoopDelay: { p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
  })}\n`,
)
