/**
 * npm run bench:writes: single grants from 64 concurrent clients through two
 * server processes over one PostgreSQL schema: the writes a second
 * acknowledged, the latency at a steady 1,000 writes a second, and how soon
 * each write is visible on the other server (its change stream delivers it).
 * The baseline a group commit is measured against.
 */
import { BenchReport, cpuPerWrite, postgresPids, sampleCpu, ROOT_EMAIL, ROOT_PASSWORD, benchRun, fmt, followStream, postgresSettings, quantile, requirePostgres, runBench, send, sleep, startReplica, type Reply, type Replica } from './replicaProcesses.js'

const postgresUrl = requirePostgres('bench:writes')

const WHOLE_RUN_MS = 180_000
const CLIENTS = 64
const THROUGHPUT_MS = 5000
const STEADY_RATE = 1000
const STEADY_MS = 3000

let token = ''
const grant = (replica: Replica, role: string): Promise<Reply> =>
  send(replica.port, 'POST', `/v2/admin/permissions/roles/${role}/grant`, token, {
    command: 'grant-role-permission',
    data: { obj: 'reports', act: 'read', domain: 'global' },
  })

/** A write acknowledged by one server: when, with which revision, and which server did not take it. */
interface Acknowledged {
  at: number
  revision: number
  other: number
}

interface Run {
  latencies: number[]
  acknowledged: Acknowledged[]
  failed: number
  ms: number
}

/** Closed loop: `clients` callers, half on each server, each granting a sub-role of its own per write, for `ms`. */
async function closedLoop(servers: readonly Replica[], clients: number, ms: number, tag: string): Promise<Run> {
  const run: Run = { latencies: [], acknowledged: [], failed: 0, ms: 0 }
  const began = performance.now()
  const until = began + ms
  const client = async (c: number) => {
    const server = c % servers.length
    for (let i = 0; performance.now() < until; i++) {
      const reply = await grant(servers[server] as Replica, `${tag}_${c}_${i}`)
      note(run, reply, server, servers.length)
    }
  }
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)))
  run.ms = performance.now() - began
  return run
}

/** Open loop: one grant every 1000/rate ms, alternating the servers, whatever the answers do. */
async function openLoop(servers: readonly Replica[], rate: number, ms: number, tag: string): Promise<Run & { worstLagMs: number }> {
  const run = { latencies: [] as number[], acknowledged: [] as Acknowledged[], failed: 0, ms: 0, worstLagMs: 0 }
  const interval = 1000 / rate
  const count = Math.round((ms / 1000) * rate)
  const began = performance.now()
  const pending: Array<Promise<void>> = []
  for (let i = 0; i < count; i++) {
    const due = began + i * interval
    const wait = due - performance.now()
    if (wait > 1) await sleep(wait)
    run.worstLagMs = Math.max(run.worstLagMs, performance.now() - due)
    const server = i % servers.length
    pending.push(
      grant(servers[server] as Replica, `${tag}_${i}`).then(
        // From the time it was due, not the time it went out: a sender running late adds its lag to the write's latency.
        (reply) => note(run, reply, server, servers.length, performance.now() - due),
        () => {
          run.failed++
        },
      ),
    )
  }
  await Promise.all(pending)
  run.ms = performance.now() - began
  return run
}

function note(run: Run, reply: Reply, server: number, servers: number, ms = reply.ms): void {
  run.latencies.push(ms)
  if (reply.status !== 200 || typeof reply.data.revision !== 'number' || reply.data.changed !== true) {
    run.failed++
    return
  }
  run.acknowledged.push({ at: performance.now(), revision: reply.data.revision, other: (server + 1) % servers })
}

/** Acknowledged writes per revision: how many writes a shared transaction carried, on average. */
const writesPerRevision = (run: Run): number => run.acknowledged.length / Math.max(1, new Set(run.acknowledged.map((w) => w.revision)).size)

/** From each write's answer until the other server's stream delivered it (0 when it came first). */
async function visibility(run: Run, streams: ReadonlyArray<{ arrivals: Map<number, number> }>): Promise<{ delays: number[]; missing: number }> {
  const deadline = performance.now() + 10_000
  const seen = (w: Acknowledged) => streams[w.other]?.arrivals.has(w.revision) === true
  while (performance.now() < deadline && !run.acknowledged.every(seen)) await sleep(20)
  const delays = run.acknowledged.filter(seen).map((w) => Math.max(0, (streams[w.other]?.arrivals.get(w.revision) ?? w.at) - w.at))
  return { delays, missing: run.acknowledged.length - delays.length }
}

const report = new BenchReport('npm run bench:writes (DATABASE_URL=postgres://…)')
const record = report.record.bind(report)
const bench = benchRun(postgresUrl, 'bench_writes', WHOLE_RUN_MS)
await runBench(bench, report, 'bench:writes', async () => {
  await bench.admin.query(`CREATE SCHEMA ${bench.schema}`)
  const settings = await postgresSettings(bench.admin)
  // A first: it applies the migrations and creates the root account.
  const a = await startReplica('A', bench.processUrl('a'))
  const b = await startReplica('B', bench.processUrl('b'))
  const servers = [a, b]
  const login = await send(a.port, 'POST', '/v2/auth/login', null, { command: 'login', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } })
  if (typeof login.data.access_token !== 'string') throw new Error(`login: ${login.status} ${login.code ?? ''}`)
  token = login.data.access_token

  // Warm-up: both processes' write paths compiled before anything is timed.
  await closedLoop(servers, 8, 1000, 'warm')
  const head = Number((await send(a.port, 'GET', '/v2/admin/changes?limit=1', token)).data.next_after)
  const streams = servers.map((server) => followStream(server, head, token))
  await sleep(200)

  const pgPids = await postgresPids(bench.admin, bench.run)
  const cpuBefore = sampleCpu(servers, pgPids)
  const load = await closedLoop(servers, CLIENTS, THROUGHPUT_MS, 'load')
  const cpu = cpuPerWrite(cpuBefore, sampleCpu(servers, pgPids), load.acknowledged.length)
  const loadSeen = await visibility(load, streams)
  record(
    `single grants, ${CLIENTS} concurrent clients on A and B, ${THROUGHPUT_MS / 1000} s: writes/s acknowledged (p50 / p99 latency)`,
    `${fmt(load.acknowledged.length / (load.ms / 1000))} writes/s`,
    `(target >= 2,000: ${load.acknowledged.length / (load.ms / 1000) >= 2000 ? 'met' : 'MISSED'}; ${fmt(quantile(load.latencies, 0.5), 1)} / ${fmt(quantile(load.latencies, 0.99), 1)} ms; ${load.failed} failed)`,
  )
  record(
    '… CPU per write acknowledged: all parties (server A + server B + PostgreSQL + load generator)',
    `${fmt(cpu.total, 2)} ms`,
    `(${cpu.servers.map((ms) => fmt(ms, 2)).join(' + ')} + ${fmt(cpu.postgres, 2)} + ${fmt(cpu.generator, 2)} ms; /proc's user + system time; PostgreSQL: the run's backends and the server's background processes; ${fmt(writesPerRevision(load), 1)} writes per transaction)`,
  )
  record(
    '… each visible on the other server (its change stream), p50 / p99',
    `${fmt(quantile(loadSeen.delays, 0.5), 1)} / ${fmt(quantile(loadSeen.delays, 0.99), 1)} ms`,
    `(target p99 < 100 ms: ${quantile(loadSeen.delays, 0.99) < 100 ? 'met' : 'MISSED'}; ${loadSeen.missing} not seen within 10 s; from the answer to the event read on the other server)`,
  )

  const steady = await openLoop(servers, STEADY_RATE, STEADY_MS, 'steady')
  const steadySeen = await visibility(steady, streams)
  const p99 = quantile(steady.latencies, 0.99)
  record(
    `single grants at a steady ${fmt(STEADY_RATE)} writes/s for ${STEADY_MS / 1000} s, A and B alternating: p50 / p99 latency`,
    `${fmt(quantile(steady.latencies, 0.5), 1)} / ${fmt(p99, 1)} ms`,
    `(target p99 < 50 ms: ${p99 < 50 ? 'met' : 'MISSED'}; ${steady.failed} failed; sender's worst lag ${fmt(steady.worstLagMs, 1)} ms)`,
  )
  record(
    '… each visible on the other server (its change stream), p50 / p99',
    `${fmt(quantile(steadySeen.delays, 0.5), 1)} / ${fmt(quantile(steadySeen.delays, 0.99), 1)} ms`,
    `(target p99 < 100 ms: ${quantile(steadySeen.delays, 0.99) < 100 ? 'met' : 'MISSED'}; ${steadySeen.missing} not seen within 10 s)`,
  )
  for (const stream of streams) stream.close()

  return { store: `${settings}, a fresh schema; 2 server processes on loopback (LOG_LEVEL=warn), the load generator in this process on the same cores` }
})
