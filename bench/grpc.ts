/**
 * gRPC figures (docs/grpc.md), `npm run bench:grpc`:
 * - ext_authz Check over h2c against a bare grpc-js server answering an
 *   empty Check, in the same run: calls a second and calls per server CPU
 *   second (target: at least 0.8 of the bare server's), and the p99 at half
 *   the measured maximum rate (target: under 2 ms);
 * - aps.authz.v1 CheckBatch of 100: decisions a second, beside HTTP
 *   check-batch's on the same server.
 * Each server is a process of its own (bench/grpcServer.ts); the client is
 * this process, so on a small machine it shares the cores with the server.
 */
import { cpus, loadavg } from 'node:os'
import { credentials, Metadata, type Client, type ServiceClientConstructor } from '@grpc/grpc-js'
import { loadServiceProtos } from '../src/grpc/protos.js'
import { freePort } from '../test/support/serverProcess.js'
import { load, median, processCpuMicros, spawnServer, type Server } from './http.js'
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

/** Calls started at a fixed `rate` for `seconds`: the p99 of their latency, in ms. */
async function atRate(ask: Ask, rate: number, seconds: number): Promise<number> {
  const latencies: number[] = []
  const total = Math.floor(rate * seconds)
  const began = performance.now()
  let sent = 0
  await new Promise<void>((resolve, reject) => {
    let answered = 0
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - began) / 1000) * rate))
      for (; sent < due; sent++) {
        const at = performance.now()
        ask((error) => {
          if (error !== null) return reject(error)
          latencies.push(performance.now() - at)
          if (++answered === total) resolve()
        })
      }
      if (sent < total) setTimeout(tick, 1)
    }
    tick()
  })
  latencies.sort((a, b) => a - b)
  return latencies[Math.floor(latencies.length * 0.99)] as number
}

const checkRequest = (token: string) => ({
  attributes: {
    request: {
      http: {
        method: 'GET',
        path: '/api/orders/42?expand=lines',
        headers: { ':authority': 'shop.example', ':method': 'GET', ':path': '/api/orders/42?expand=lines', authorization: `Bearer ${token}`, 'user-agent': 'bench', 'x-request-id': 'r-1' },
      },
    },
  },
})

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
const batchAsk: Ask = (done) => (authz as unknown as { CheckBatch: Unary }).CheckBatch(batch, metadata, (error) => done(error))

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
  const p99 = await atRate(ours, rps / 2, SECONDS)
  const batchRuns = []
  for (let r = 0; r < ROUNDS; r++) batchRuns.push(await saturate(service, batchAsk, SECONDS))
  const grpcBatch = median(batchRuns.map((r) => r.rps)) * 100
  const httpBatch = []
  for (let r = 0; r < ROUNDS; r++) {
    httpBatch.push(await load({ name: 'check-batch', server: service.server, path: '/v2/authz/check-batch', method: 'POST', body: BATCH, decisions: 100, status: 200 }, SECONDS))
  }
  const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
  console.log(`gRPC bench: ${ROUNDS} rounds of ${SECONDS} s, ${IN_FLIGHT} calls in flight; ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`)
  console.log('| figure | service | bare grpc-js | ratio | target |')
  console.log('|---|---:|---:|---:|---|')
  console.log(`| ext_authz Check, calls/s | ${fmt(rps)} | ${fmt(bareRps)} | ${fmt(rps / bareRps, 2)} | ≥ 0.8 |`)
  console.log(`| ext_authz Check, calls per server CPU second | ${fmt(perCpu)} | ${fmt(barePerCpu)} | ${fmt(perCpu / barePerCpu, 2)} | ≥ 0.8 |`)
  console.log(`| ext_authz Check p99 at ${fmt(rps / 2)} calls/s (half the maximum) | ${fmt(p99, 2)} ms | | | < 2 ms |`)
  console.log(`| CheckBatch of 100, decisions/s (gRPC) | ${fmt(grpcBatch)} | | | |`)
  console.log(`| check-batch of 100, decisions/s (HTTP, same server) | ${fmt(median(httpBatch.map((r) => r.rps)) * 100)} | | | |`)
} finally {
  for (const c of [serviceCheck, bareCheck, authz]) c.close()
  await Promise.all([service.server.stop(), bare.server.stop()])
}
