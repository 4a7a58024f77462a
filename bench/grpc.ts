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
 * h2load sends a rate's calls in bursts (its timer's ticks: with 64
 * streams a connection, most calls leave within 50 µs of another, up to a
 * few dozen together, as the burst row shows), so a burst's last call also
 * waits for the server's work on the ones before it. The due-time row adds
 * the time a call was sent late against an even schedule (the k-th call
 * due at the first send plus k calls at the rate), which counts h2load's
 * own lateness, and a call held back on a busy connection. Without h2load the
 * sender is bench/grpcLoad.ts, a Node process: the same figure then also
 * holds grpc-js's client and that process's garbage collection and event
 * loop stalls, shown beside it (the time from each call's due time, and
 * the sender's loop delay). Either way the server's event-loop delay over
 * the run is shown, which tells a stalled server from a stalled sender.
 *
 * The second table runs the same rate on a third server beside the two, a
 * bare node:http2 responder (bench/grpcServer.ts `http2`: the same answer's
 * bytes, no gRPC library), the floor under any gRPC server on Node: a tail
 * it shows too is Node's HTTP/2 and V8's collector, not grpc-js's or the
 * service's. It does so in each h2load shape of SHAPES, with each server's
 * CPU time per call and its collections by kind (scavenges of the young
 * generation, mark-compacts of the whole heap). BENCH_GRPC_NODE_FLAGS
 * passes flags to all three servers (e.g. `--max-semi-space-size=4`).
 */
import { spawn } from 'node:child_process'
import { cpus, loadavg } from 'node:os'
import { credentials, Metadata, type Client, type MethodDefinition, type ServiceClientConstructor } from '@grpc/grpc-js'
import { loadServiceProtos } from '../src/grpc/protos.js'
import { freePort } from '../test/support/serverProcess.js'
import { load, median, processCpuMicros, spawnServer, type Server } from './http.js'
import { checkRequest, type LatencySpread } from './grpcRequests.js'
import { h2loadAtRate, h2loadAvailable, type H2loadRun, type H2loadShape } from './grpcH2load.js'
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

/** V8 or Node flags for the three servers (BENCH_GRPC_NODE_FLAGS, space-separated), to try e.g. a semi-space size. */
const NODE_FLAGS = (process.env.BENCH_GRPC_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '')

async function start(mode: 'service' | 'bare' | 'http2'): Promise<GrpcServer> {
  const port = await freePort()
  return { server: await spawnServer('./grpcServer.ts', [mode, String(port)], NODE_FLAGS), port }
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
/** h2load's shape for the main table's latency rows: CHANNELS connections, 64 calls in flight on each. */
const H2LOAD_SHAPE: H2loadShape = { connections: CHANNELS, streams: 64 }
/**
 * The shapes of the second table: the main one, and one call in flight on
 * each of 8 connections, which h2load sends as an answer comes back or its
 * timer fires, so a burst holds at most one call a connection, where with
 * 64 streams the timer's ticks send a few dozen at once. One call a
 * connection holds a call back while the one before is answered: the
 * due-time row counts that wait.
 */
const SHAPES: H2loadShape[] = [H2LOAD_SHAPE, { connections: 8, streams: 1 }]

interface AtRate {
  fromSend: LatencySpread
  /** The Node sender's only. */
  fromDue?: LatencySpread
  senderLoopDelay?: { p99: number; max: number }
  /** h2load's only: calls sent and those unanswered when it stopped, and how evenly they went out. */
  calls?: number
  unanswered?: number
  bursts?: H2loadRun['bursts']
  serverLoopDelay: ServerLoop
  /** The server's CPU time per call over the run, µs. */
  cpuPerCall: number
}

/** The server's event-loop delay (ms) and its garbage collections (count, total and longest pause in ms) over a run. */
interface ServerLoop {
  p99: number
  max: number
  gc: { count: number; total: number; max: number; scavenges: number; markCompacts: number }
  /** Over the scavenges: the young generation's bytes at their start (about the bytes allocated) and those still alive after. */
  scavenged: { young: number; kept: number }
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
async function atRate(target: GrpcServer, rate: number, seconds: number, expectOk: boolean, shape: H2loadShape = H2LOAD_SHAPE): Promise<AtRate> {
  await serverLoopDelay(target)
  const before = processCpuMicros(target.server.pid)
  const cpuPerCall = (calls: number): number => (processCpuMicros(target.server.pid) - before) / Math.max(1, calls)
  if (H2LOAD) {
    const check = Authorization.service.Check as MethodDefinition<unknown, unknown>
    const run = await h2loadAtRate(target.port, check.path, check.requestSerialize(request), rate, seconds, shape)
    // The warm-up second's calls are not in h2load's log but are in the CPU time.
    return { fromSend: run.spread, fromDue: run.fromDue, calls: run.calls, unanswered: run.unanswered, bursts: run.bursts, cpuPerCall: cpuPerCall(run.calls * ((seconds + 1) / seconds)), serverLoopDelay: await serverLoopDelay(target) }
  }
  const sender = spawn(process.execPath, ['--import', 'tsx', new URL('./grpcLoad.ts', import.meta.url).pathname, JSON.stringify({ port: target.port, rate, seconds, channels: CHANNELS, token: target.server.token, expectOk })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  sender.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => sender.once('exit', resolve))
  if (code !== 0) throw new Error(`bench/grpcLoad.ts exited with ${code}`)
  const sent = JSON.parse(out) as Omit<AtRate, 'serverLoopDelay' | 'cpuPerCall'>
  // The sender's 200 warm-up calls on each connection are in the CPU time too.
  return { ...sent, cpuPerCall: cpuPerCall(rate * seconds + 200 * CHANNELS), serverLoopDelay: await serverLoopDelay(target) }
}

const service = await start('service')
const bare = await start('bare')
const http2 = await start('http2')
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
  // The same rate on the three servers (the service, bare grpc-js, bare node:http2), h2load in each of SHAPES.
  // The main shape's service and grpc-js runs are the ones above.
  const shaped = [{ shape: H2LOAD_SHAPE, runs: [oursAtRate, bareAtRate, await atRate(http2, rate, SECONDS, false)] }]
  for (const shape of H2LOAD ? SHAPES.slice(1) : []) {
    shaped.push({ shape, runs: [await atRate(service, rate, SECONDS, true, shape), await atRate(bare, rate, SECONDS, false, shape), await atRate(http2, rate, SECONDS, false, shape)] })
  }
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
  console.log('')
  console.log(`ext_authz Check at ${fmt(rate)} calls/s on each server in turn (${sender}), beside a bare node:http2 responder (no gRPC library):`)
  console.log('| sender, figure | service | bare grpc-js | bare node:http2 |')
  console.log('|---|---:|---:|---:|')
  const row = (label: string, runs: AtRate[], text: (run: AtRate) => string) => console.log(`| ${label} | ${runs.map(text).join(' | ')} |`)
  for (const { shape, runs } of shaped) {
    const name = H2LOAD ? `h2load ${shape.connections} conn × ${shape.streams} streams` : sender
    row(`${name}: p50 / p90 / p99 / max, send to answer, ms`, runs, (r) => spreadText(r.fromSend))
    row(`${name}: p50 / p90 / p99 / max, due time to answer, ms`, runs, (r) => (r.fromDue === undefined ? '' : spreadText(r.fromDue)))
    if (H2LOAD) row(`${name}: calls sent within 50 µs of another, share / largest burst`, runs, (r) => (r.bursts === undefined ? '' : `${fmt(r.bursts.shared * 100)} % / ${r.bursts.largest}`))
    row(`${name}: server CPU per call, µs`, runs, (r) => fmt(r.cpuPerCall))
    row(`${name}: server event-loop delay p99 / max, ms`, runs, (r) => delay(r.serverLoopDelay))
    row(`${name}: server GCs: count (scavenges / mark-compacts) / total / longest pause, ms`, runs, ({ serverLoopDelay: { gc } }) => `${gc.count} (${gc.scavenges} / ${gc.markCompacts}) / ${fmt(gc.total, 1)} / ${fmt(gc.max, 1)}`)
    if (H2LOAD) {
      // Per call sent in the run: the scavenges' young bytes (about the allocation) and what of it survived them.
      const perCall = (r: AtRate, bytes: number) => fmt(bytes / 1024 / Math.max(1, (r.calls ?? 0) * ((SECONDS + 1) / SECONDS)), 1)
      row(`${name}: server bytes scavenged / kept by scavenges, per call, KB`, runs, (r) => `${perCall(r, r.serverLoopDelay.scavenged.young)} / ${perCall(r, r.serverLoopDelay.scavenged.kept)}`)
    }
  }
  if (NODE_FLAGS.length > 0) console.log(`Servers run with: ${NODE_FLAGS.join(' ')}`)
} finally {
  for (const c of [serviceCheck, bareCheck, authz]) c.close()
  await Promise.all([service.server.stop(), bare.server.stop(), http2.server.stop()])
}
