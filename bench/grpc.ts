/**
 * gRPC figures (docs/grpc.md), `npm run bench:grpc`:
 * - ext_authz Check over h2c against a bare grpc-js server answering an
 *   empty Check, in the same run: calls a second and calls per server CPU
 *   second (target: at least 0.8 of the bare server's), and the p99 at half
 *   the measured maximum rate (target: under 2 ms);
 * - aps.authz.v1 CheckBatch of 100: decisions a second, beside HTTP
 *   check-batch's on the same server (neither client decodes the answers).
 * Each server is a process of its own (bench/grpcServer.ts); the closed
 * loops' client is this process, so on a small machine it shares the cores
 * with the server.
 *
 * The latency rows: both servers in turn at the same rate (half the
 * service's maximum), 4 connections. With h2load installed (Debian's
 * `nghttp2-client`; bench/grpcH2load.ts) it is the sender, and each figure
 * is the time from the call's send on its stream to the end of its answer
 * (headers, message, trailers): the server (HTTP/2, grpc-js, the service),
 * the loopback, and h2load's own reading, which in C on libev adds little;
 * h2load sends a rate's calls in small bursts (its timer's ticks), so a
 * burst's last call also waits for the ones before it. Without h2load the
 * sender is bench/grpcLoad.ts, a Node process: the same figure then also
 * holds grpc-js's client and that process's garbage collection and event
 * loop stalls, shown beside it (the time from each call's due time, and
 * the sender's loop delay). Either way the server's event-loop delay over
 * the run is shown, which tells a stalled server from a stalled sender.
 */
import { spawn } from 'node:child_process'
import { cpus, loadavg } from 'node:os'
import { credentials, Metadata, type Client, type MethodDefinition, type ServiceClientConstructor } from '@grpc/grpc-js'
import { loadServiceProtos } from '../src/grpc/protos.js'
import { freePort } from '../test/support/serverProcess.js'
import { load, median, processCpuMicros, spawnServer, type Server } from './http.js'
import { checkRequest, type LatencySpread } from './grpcRequests.js'
import { h2loadAtRate, h2loadAvailable } from './grpcH2load.js'
import { BATCH } from './seed.js'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const IN_FLIGHT = 64

const packages = loadServiceProtos().packages
function constructor(path: string): ServiceClientConstructor {
  let node: unknown = packages
  for (const part of path.split('.')) node = (node as Record<string, unknown>)[part]
  return node as ServiceClientConstructor
}
const Authorization = constructor('envoy.service.auth.v3.Authorization')
const Authz = constructor('aps.authz.v1.Authz')

interface GrpcServer {
  server: Server
  port: number
}

async function start(mode: 'service' | 'bare'): Promise<GrpcServer> {
  const port = await freePort()
  return { server: await spawnServer('./grpcServer.ts', [mode, String(port)]), port }
}

type Ask = (done: (error: Error | null) => void) => void

/** Calls kept IN_FLIGHT at once for `seconds`: calls a second and server CPU µs per call. */
async function saturate(target: GrpcServer, ask: Ask, seconds: number): Promise<{ rps: number; cpuPerCall: number }> {
  const before = processCpuMicros(target.server.pid)
  const end = performance.now() + seconds * 1000
  let calls = 0
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        await new Promise<void>((resolve, reject) => ask((error) => (error === null ? resolve() : reject(error))))
        calls++
      }
    }),
  )
  const cpu = processCpuMicros(target.server.pid) - before
  return { rps: calls / seconds, cpuPerCall: cpu / Math.max(1, calls) }
}

/** How many connections the open-loop sender spreads its calls over. */
const CHANNELS = 4

interface AtRate {
  fromSend: LatencySpread
  /** The Node sender's only. */
  fromDue?: LatencySpread
  senderLoopDelay?: { p99: number; max: number }
  /** h2load's only: calls sent and those unanswered when it stopped. */
  calls?: number
  unanswered?: number
  serverLoopDelay: ServerLoop
}

/** The server's event-loop delay (ms) and its garbage collections (count, total and longest pause in ms) over a run. */
interface ServerLoop {
  p99: number
  max: number
  gc: { count: number; total: number; max: number }
}

const H2LOAD = h2loadAvailable()

/** The server's event-loop delay since it was last asked (bench/grpcServer.ts answers SIGUSR2 with a LOOP line). */
function serverLoopDelay(target: GrpcServer): Promise<ServerLoop> {
  return new Promise((resolve) => {
    let text = ''
    const onData = (chunk: Buffer): void => {
      text += chunk.toString()
      const match = /LOOP (\{[^\n]*\})\n/.exec(text)
      if (match === null) return
      target.server.child.stderr?.off('data', onData)
      resolve(JSON.parse(match[1] as string) as ServerLoop)
    }
    target.server.child.stderr?.on('data', onData)
    process.kill(target.server.pid, 'SIGUSR2')
  })
}

/** Calls sent at a fixed `rate` for `seconds` by a process of their own (h2load, else bench/grpcLoad.ts): their latency spread, and the event loops' delay meanwhile. */
async function atRate(target: GrpcServer, rate: number, seconds: number, expectOk: boolean): Promise<AtRate> {
  await serverLoopDelay(target)
  if (H2LOAD) {
    const check = Authorization.service.Check as MethodDefinition<unknown, unknown>
    const run = await h2loadAtRate(target.port, check.path, check.requestSerialize(request), rate, seconds, CHANNELS)
    return { fromSend: run.spread, calls: run.calls, unanswered: run.unanswered, serverLoopDelay: await serverLoopDelay(target) }
  }
  const sender = spawn(process.execPath, ['--import', 'tsx', new URL('./grpcLoad.ts', import.meta.url).pathname, JSON.stringify({ port: target.port, rate, seconds, channels: CHANNELS, token: target.server.token, expectOk })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  sender.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => sender.once('exit', resolve))
  if (code !== 0) throw new Error(`bench/grpcLoad.ts exited with ${code}`)
  const sent = JSON.parse(out) as Omit<AtRate, 'serverLoopDelay'>
  return { ...sent, serverLoopDelay: await serverLoopDelay(target) }
}

const service = await start('service')
const bare = await start('bare')
const client = (ctor: ServiceClientConstructor, port: number): Client => new ctor(`127.0.0.1:${port}`, credentials.createInsecure())
const serviceCheck = client(Authorization, service.port)
const bareCheck = client(Authorization, bare.port)
const authz = client(Authz, service.port)
const request = checkRequest(service.server.token)
const metadata = new Metadata()
metadata.set('authorization', `Bearer ${service.server.token}`)
const batch = { checks: (JSON.parse(BATCH) as { data: { checks: unknown[] } }).data.checks }

type Unary = (request: unknown, metadataOrCallback: unknown, callback?: (error: Error | null, answer: { status?: { code?: number } }) => void) => void
const checkOn =
  (c: Client, expectOk: boolean): Ask =>
  (done) =>
    (c as unknown as { Check: Unary }).Check(request, (error: Error | null, answer: { status?: { code?: number } }) =>
      done(error ?? (expectOk && (answer.status?.code ?? 0) !== 0 ? new Error(`not allowed: ${JSON.stringify(answer)}`) : null)),
    )
// The answer is taken as its bytes, not decoded: autocannon does not parse HTTP check-batch's body either, and on
// 2 cores the client's decoding of 100 results, not the server, was what the figure measured.
const checkBatch = Authz.service.CheckBatch as MethodDefinition<unknown, unknown>
const batchAsk: Ask = (done) =>
  authz.makeUnaryRequest(checkBatch.path, checkBatch.requestSerialize, (bytes: Buffer) => bytes, batch, metadata, (error, answer) =>
    done(error ?? (answer === undefined || answer.length < 100 ? new Error('no answer') : null)),
  )

try {
  const ours = checkOn(serviceCheck, true)
  const theirs = checkOn(bareCheck, false)
  for (const ask of [ours, theirs]) await saturate(ask === ours ? service : bare, ask, 1)
  const runs: Array<{ ours: Awaited<ReturnType<typeof saturate>>; bare: Awaited<ReturnType<typeof saturate>> }> = []
  for (let r = 0; r < ROUNDS; r++) runs.push({ ours: await saturate(service, ours, SECONDS), bare: await saturate(bare, theirs, SECONDS) })
  const rps = median(runs.map((r) => r.ours.rps))
  const bareRps = median(runs.map((r) => r.bare.rps))
  const perCpu = median(runs.map((r) => 1e6 / r.ours.cpuPerCall))
  const barePerCpu = median(runs.map((r) => 1e6 / r.bare.cpuPerCall))
  // Both servers at the same rate, the service's half maximum, one after the other.
  const rate = Math.round(rps / 2)
  const oursAtRate = await atRate(service, rate, SECONDS, true)
  const bareAtRate = await atRate(bare, rate, SECONDS, false)
  const batchRuns = []
  for (let r = 0; r < ROUNDS; r++) batchRuns.push(await saturate(service, batchAsk, SECONDS))
  const grpcBatch = median(batchRuns.map((r) => r.rps)) * 100
  const httpBatch = []
  for (let r = 0; r < ROUNDS; r++) {
    httpBatch.push(await load({ name: 'check-batch', server: service.server, path: '/v2/authz/check-batch', method: 'POST', body: BATCH, decisions: 100, status: 200 }, SECONDS))
  }
  const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
  if (!H2LOAD) console.log('h2load not found (Debian package nghttp2-client): the latency rows come from the Node sender, bench/grpcLoad.ts, and hold its own stalls')
  console.log(`gRPC bench: ${ROUNDS} rounds of ${SECONDS} s, ${IN_FLIGHT} calls in flight; ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  console.log('| figure | service | bare grpc-js | ratio | target |')
  console.log('|---|---:|---:|---:|---|')
  console.log(`| ext_authz Check, calls/s | ${fmt(rps)} | ${fmt(bareRps)} | ${fmt(rps / bareRps, 2)} | ≥ 0.8 |`)
  console.log(`| ext_authz Check, calls per server CPU second | ${fmt(perCpu)} | ${fmt(barePerCpu)} | ${fmt(perCpu / barePerCpu, 2)} | ≥ 0.8 |`)
  const ms = (n: number) => `${fmt(n, 2)} ms`
  const spreadText = (s: LatencySpread) => [s.p50, s.p90, s.p99, s.max].map((n) => fmt(n, 2)).join(' / ')
  const sender = H2LOAD ? 'h2load' : 'Node sender'
  const delay = (d: { p99: number; max: number } | undefined) => (d === undefined ? '' : `${fmt(d.p99, 2)} / ${fmt(d.max, 2)}`)
  console.log(`| ext_authz Check p99 at ${fmt(rate)} calls/s (half the maximum), send to answer, ${sender} | ${ms(oursAtRate.fromSend.p99)} | ${ms(bareAtRate.fromSend.p99)} | | < 2 ms |`)
  console.log(`| (same) p50 / p90 / p99 / max, send to answer, ms | ${spreadText(oursAtRate.fromSend)} | ${spreadText(bareAtRate.fromSend)} | | |`)
  if (oursAtRate.fromDue !== undefined && bareAtRate.fromDue !== undefined) {
    console.log(`| (same) p50 / p90 / p99 / max, due time to answer, ms | ${spreadText(oursAtRate.fromDue)} | ${spreadText(bareAtRate.fromDue)} | | |`)
  }
  console.log(`| (same) server event-loop delay p99 / max, ms | ${delay(oursAtRate.serverLoopDelay)} | ${delay(bareAtRate.serverLoopDelay)} | | |`)
  const gcText = ({ gc }: ServerLoop) => `${gc.count} / ${fmt(gc.total, 1)} / ${fmt(gc.max, 1)}`
  console.log(`| (same) server garbage collections: count / total / longest pause, ms | ${gcText(oursAtRate.serverLoopDelay)} | ${gcText(bareAtRate.serverLoopDelay)} | | |`)
  if (H2LOAD) console.log(`| (same) calls sent / unanswered at the end | ${fmt(oursAtRate.calls ?? 0)} / ${fmt(oursAtRate.unanswered ?? 0)} | ${fmt(bareAtRate.calls ?? 0)} / ${fmt(bareAtRate.unanswered ?? 0)} | | |`)
  else console.log(`| (same) sender event-loop delay p99 / max, ms | ${delay(oursAtRate.senderLoopDelay)} | ${delay(bareAtRate.senderLoopDelay)} | | |`)
  console.log(`| CheckBatch of 100, decisions/s (gRPC) | ${fmt(grpcBatch)} | | | |`)
  console.log(`| check-batch of 100, decisions/s (HTTP, same server) | ${fmt(median(httpBatch.map((r) => r.rps)) * 100)} | | | |`)
} finally {
  for (const c of [serviceCheck, bareCheck, authz]) c.close()
  await Promise.all([service.server.stop(), bare.server.stop()])
}
