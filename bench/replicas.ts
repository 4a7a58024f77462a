/**
 * npm run bench:replicas: two server processes over one PostgreSQL schema,
 * measured over HTTP on loopback. A fresh schema of DATABASE_URL's database
 * is made for the run and dropped at the end; both processes are stopped
 * whatever happens. Without a PostgreSQL DATABASE_URL there is nothing to
 * measure (the embedded store serves one process).
 */
import { verifyAudit } from '../src/commands/verifyAudit.js'
import type { Database } from '../src/storage/db.js'
import { openPostgres } from '../src/storage/pg.js'
import {
  BenchReport,
  ROOT_EMAIL,
  ROOT_PASSWORD,
  benchRun,
  fmt,
  followStream,
  postgresSettings,
  quantile,
  requirePostgres,
  runBench,
  send,
  sleep,
  startReplica,
  type Replica,
  type Reply,
} from './replicaProcesses.js'

const postgresUrl = requirePostgres('bench:replicas')

/** Past this the run is abandoned (and cleaned up): it must stay bounded. */
const WHOLE_RUN_MS = 240_000
const PROPAGATION_SAMPLES = 200
const STALE_ROUNDS = 500
const THROUGHPUT_MS = 5000
const CLIENTS_PER_REPLICA = 8
const STEADY_RATE = 50
const STEADY_MS = 10_000

// ---------------------------------------------------------------- the service's API

let token = ''

const roleWrite = (replica: Replica, action: 'grant' | 'revoke', role: string, obj: string, act: string, domain: string) =>
  send(replica.port, action === 'grant' ? 'POST' : 'DELETE', `/v2/admin/permissions/roles/${role}/${action}`, token, {
    command: `${action}-role-permission`,
    data: { obj, act, domain },
  })

const check = (replica: Replica, userId: string, obj: string, act: string, domain: string, minRevision?: number) =>
  send(
    replica.port,
    'GET',
    `/v2/authz/check?obj=${obj}&act=${act}&domain=${domain}&user_id=${userId}${minRevision !== undefined ? `&min_revision=${minRevision}` : ''}`,
    token,
  )

function revisionOf(reply: Reply): number {
  if (reply.status !== 200 || typeof reply.data.revision !== 'number') throw new Error(`a write failed: ${reply.status} ${reply.code ?? ''}`)
  return reply.data.revision
}

// ---------------------------------------------------------------- measurements

const report = new BenchReport('npm run bench:replicas (DATABASE_URL=postgres://…)')
const record = report.record.bind(report)

/**
 * From the write's answer on A until B's check answers the new way: B is
 * asked back to back, so each figure is an upper bound by at most one check's
 * round trip. Grants and revokes alternate.
 */
async function propagation(a: Replica, b: Replica, userId: string, samples: number): Promise<number[]> {
  const delays: number[] = []
  for (let i = 0; i < samples; i++) {
    const grant = i % 2 === 0
    revisionOf(await roleWrite(a, grant ? 'grant' : 'revoke', 'clerk', 'orders', 'refund', 'm1'))
    const answered = performance.now()
    for (;;) {
      const seen = await check(b, userId, 'orders', 'refund', 'm1')
      if (seen.data.allowed === grant) break
      if (performance.now() - answered > 5000) throw new Error(`B did not apply write ${i} within 5 s`)
    }
    delays.push(performance.now() - answered)
  }
  return delays
}

interface StaleRun {
  allowed: number
  refused: number
  latencies: number[]
}

/** Grant and revoke through A, then B's check with the revoke's revision: it must never allow. */
async function staleAllows(a: Replica, b: Replica, userId: string, rounds: number): Promise<StaleRun> {
  const run: StaleRun = { allowed: 0, refused: 0, latencies: [] }
  for (let i = 0; i < rounds; i++) {
    revisionOf(await roleWrite(a, 'grant', 'clerk', 'orders', 'cancel', 'm1'))
    const revoked = revisionOf(await roleWrite(a, 'revoke', 'clerk', 'orders', 'cancel', 'm1'))
    const seen = await check(b, userId, 'orders', 'cancel', 'm1', revoked)
    run.latencies.push(seen.ms)
    if (seen.status !== 200) run.refused++
    if (seen.data.allowed === true) run.allowed++
  }
  return run
}

interface LoadRun {
  acknowledged: number
  failed: number
  unchanged: number
  perSecond: number
  latencies: number[]
}

/** Closed loop: `clients` callers per replica, each granting a sub-role of its own per write, for `ms`. */
async function grantLoad(replicas: Replica[], clients: number, ms: number, tag: string): Promise<LoadRun> {
  const run: LoadRun = { acknowledged: 0, failed: 0, unchanged: 0, perSecond: 0, latencies: [] }
  const startedAt = performance.now()
  const until = startedAt + ms
  const client = async (replica: Replica, id: string) => {
    for (let i = 0; performance.now() < until; i++) {
      const reply = await roleWrite(replica, 'grant', `${tag}_${id}_${i}`, 'reports', 'read', 'global')
      run.latencies.push(reply.ms)
      if (reply.status !== 200) run.failed++
      else {
        run.acknowledged++
        if (reply.data.changed !== true) run.unchanged++
      }
    }
  }
  await Promise.all(replicas.flatMap((replica, r) => Array.from({ length: clients }, (_, c) => client(replica, `${r}_${c}`))))
  run.perSecond = run.acknowledged / ((performance.now() - startedAt) / 1000)
  return run
}

interface SteadyRun {
  latencies: number[]
  failed: number
  /** How late the worst send left against its schedule (the load generator's own lag). */
  worstLagMs: number
}

/** Open loop: one grant every 1000/rate ms, alternating A and B, whatever the answers do. */
async function steadyWrites(replicas: Replica[], rate: number, ms: number): Promise<SteadyRun> {
  const run: SteadyRun = { latencies: [], failed: 0, worstLagMs: 0 }
  const interval = 1000 / rate
  const count = Math.round((ms / 1000) * rate)
  const startedAt = performance.now()
  const pending: Array<Promise<void>> = []
  for (let i = 0; i < count; i++) {
    const due = startedAt + i * interval
    const wait = due - performance.now()
    if (wait > 0) await sleep(wait)
    run.worstLagMs = Math.max(run.worstLagMs, performance.now() - due)
    const replica = replicas[i % replicas.length] as Replica
    pending.push(
      roleWrite(replica, 'grant', `steady_${i}`, 'reports', 'read', 'global').then((reply) => {
        run.latencies.push(reply.ms)
        if (reply.status !== 200 || reply.data.changed !== true) run.failed++
      }),
    )
  }
  await Promise.all(pending)
  return run
}


/** From the write's answer on A until B's change stream delivers its event (B applies it from the feed first). */
async function streamDelivery(a: Replica, b: Replica, samples: number): Promise<number[]> {
  const head = await send(a.port, 'GET', '/v2/admin/changes?limit=1', token)
  const stream = followStream(b, Number(head.data.next_after), token)
  await sleep(200)
  const delays: number[] = []
  try {
    for (let i = 0; i < samples; i++) {
      const revision = revisionOf(await roleWrite(a, i % 2 === 0 ? 'grant' : 'revoke', 'clerk', 'orders', 'read', 'm1'))
      const answered = performance.now()
      while (!stream.arrivals.has(revision)) {
        if (performance.now() - answered > 5000) throw new Error(`B's stream did not deliver revision ${revision} within 5 s`)
        await sleep(1)
      }
      delays.push(Math.max(0, (stream.arrivals.get(revision) ?? answered) - answered))
    }
  } finally {
    stream.close()
  }
  return delays
}

/** A poll of 1,000 changes after `after`, timed `times` times on `replica`. */
async function pollTimes(replica: Replica, after: number, times: number): Promise<{ ms: number[]; items: number }> {
  const ms: number[] = []
  let items = 0
  for (let i = 0; i < times; i++) {
    const reply = await send(replica.port, 'GET', `/v2/admin/changes?after=${after}&limit=1000`, token)
    if (reply.status !== 200) throw new Error(`poll: ${reply.status} ${reply.code ?? ''}`)
    items = (reply.data.items as unknown[]).length
    ms.push(reply.ms)
  }
  return { ms, items }
}

async function auditRowsLike(db: Database, prefix: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM permission_audit WHERE target_type = 'role' AND action = 'grant' AND starts_with(target_id, $1)",
    [prefix],
  )
  return rows[0]?.n ?? -1
}

// ---------------------------------------------------------------- the run

const bench = benchRun(postgresUrl, 'bench_replicas', WHOLE_RUN_MS)
const { schema, admin } = bench
let db: Database | null = null
bench.beforeDrop(async () => {
  await db?.close()
})

await runBench(bench, report, 'bench:replicas', async () => {
  await admin.query(`CREATE SCHEMA ${schema}`)
  db = openPostgres({ url: postgresUrl, schema, max: 2 })
  const settings = await postgresSettings(admin)

  // A first: it applies the migrations and creates the root account.
  const a = await startReplica('A', bench.processUrl('a'))
  const b = await startReplica('B', bench.processUrl('b'))

  const login = await send(a.port, 'POST', '/v2/auth/login', null, { command: 'login', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } })
  if (typeof login.data.access_token !== 'string') throw new Error(`login: ${login.status} ${login.code ?? ''}`)
  token = login.data.access_token
  const onboarded = await send(a.port, 'POST', '/v2/admin/merchants', token, {
    command: 'onboard-merchant',
    data: { merchant_id: 'm1', email: 'owner@m1.bench', password: 'bench-password', name: 'Owner' },
  })
  if (onboarded.status !== 201) throw new Error(`onboard: ${onboarded.status} ${onboarded.code ?? ''}`)
  const clerk = await send(a.port, 'POST', '/v2/admin/register', token, {
    command: 'register-admin',
    data: { email: 'clerk@m1.bench', password: 'bench-password', name: 'Clerk', sub_role_code: 'clerk', merchant_id: 'm1' },
  })
  const clerkId = clerk.data.id
  if (clerk.status !== 201 || typeof clerkId !== 'string') throw new Error(`register: ${clerk.status} ${clerk.code ?? ''}`)
  const reached = await send(b.port, 'GET', `/v2/profile?min_revision=${String(clerk.data.revision)}`, token)
  if (reached.status !== 200) throw new Error(`B did not reach the set-up: ${reached.status} ${reached.code ?? ''}`)

  // Warm-up: both processes' code paths compiled before anything is timed.
  await propagation(a, b, clerkId, 20)
  await staleAllows(a, b, clerkId, 20)
  await grantLoad([a, b], 2, 500, 'warm')

  const delays = await propagation(a, b, clerkId, PROPAGATION_SAMPLES)
  const p50 = quantile(delays, 0.5)
  const p99 = quantile(delays, 0.99)
  record(
    `propagation A → B, p50 / p99 (${PROPAGATION_SAMPLES} samples, grant and revoke alternating)`,
    `${fmt(p50, 1)} / ${fmt(p99, 1)} ms`,
    `(targets <= 20 / <= 100 ms: ${p50 <= 20 && p99 <= 100 ? 'met' : 'MISSED'}; max ${fmt(Math.max(...delays), 1)} ms; from A's answer to B's first changed answer)`,
  )

  const stale = await staleAllows(a, b, clerkId, STALE_ROUNDS)
  record(
    `stale allows on B with min_revision after a revoke on A (${STALE_ROUNDS} rounds)`,
    fmt(stale.allowed),
    `(target 0: ${stale.allowed === 0 ? 'met' : 'MISSED'}; ${stale.refused} answered 503 902)`,
  )
  record(
    "B's check with the revoke's min_revision, p50 / p99 latency",
    `${fmt(quantile(stale.latencies, 0.5), 1)} / ${fmt(quantile(stale.latencies, 0.99), 1)} ms`,
    '(includes the wait for the notification when B is behind)',
  )

  const stream = await streamDelivery(a, b, PROPAGATION_SAMPLES)
  record(
    `change stream delivery A → B's stream, p50 / p99 (${PROPAGATION_SAMPLES} samples)`,
    `${fmt(quantile(stream, 0.5), 1)} / ${fmt(quantile(stream, 0.99), 1)} ms`,
    `(target p99 < 100 ms: ${quantile(stream, 0.99) < 100 ? 'met' : 'MISSED'}; from A's answer to the event read on B's stream)`,
  )
  const beforeLoad = Number((await send(a.port, 'GET', '/v2/admin/changes?limit=1', token)).data.next_after)

  const auditBefore = await auditRowsLike(db, 'both_')
  const both = await grantLoad([a, b], CLIENTS_PER_REPLICA, THROUGHPUT_MS, 'both')
  const auditAfter = await auditRowsLike(db, 'both_')
  record(
    `grant throughput through A and B together, ${CLIENTS_PER_REPLICA} clients each, ${THROUGHPUT_MS / 1000} s (p50 / p99 latency)`,
    `${fmt(both.perSecond)} writes/s`,
    `(${fmt(quantile(both.latencies, 0.5), 1)} / ${fmt(quantile(both.latencies, 0.99), 1)} ms; ${fmt(both.acknowledged)} acknowledged, ${both.failed} failed, ${both.unchanged} unchanged; audit rows ${fmt(auditAfter - auditBefore)})`,
  )
  if (auditAfter - auditBefore !== both.acknowledged) throw new Error(`audit rows ${auditAfter - auditBefore} != acknowledged writes ${both.acknowledged}`)
  const one = await grantLoad([a], CLIENTS_PER_REPLICA * 2, THROUGHPUT_MS, 'one')
  record(
    `grant throughput through A alone, ${CLIENTS_PER_REPLICA * 2} clients, ${THROUGHPUT_MS / 1000} s (p50 / p99 latency)`,
    `${fmt(one.perSecond)} writes/s`,
    `(${fmt(quantile(one.latencies, 0.5), 1)} / ${fmt(quantile(one.latencies, 0.99), 1)} ms; ${one.failed} failed; for comparison)`,
  )

  const polled = await pollTimes(b, beforeLoad, 21)
  record(
    `a poll of ${fmt(polled.items)} changes on B, p50 / max (21 polls)`,
    `${fmt(quantile(polled.ms, 0.5), 1)} / ${fmt(Math.max(...polled.ms), 1)} ms`,
    `(target < 50 ms: ${quantile(polled.ms, 0.5) < 50 ? 'met' : 'MISSED'}; over HTTP, JSON included)`,
  )

  const steady = await steadyWrites([a, b], STEADY_RATE, STEADY_MS)
  const steadyP99 = quantile(steady.latencies, 0.99)
  record(
    `write latency at a steady ${STEADY_RATE} writes/s for ${STEADY_MS / 1000} s, A and B alternating: p50 / p99 / max`,
    `${fmt(quantile(steady.latencies, 0.5), 1)} / ${fmt(steadyP99, 1)} / ${fmt(Math.max(...steady.latencies), 1)} ms`,
    `(target p99 < 20 ms: ${steadyP99 < 20 ? 'met' : 'MISSED'}; ${steady.failed} failed; sender's worst lag ${fmt(steady.worstLagMs, 1)} ms)`,
  )

  const chain = await verifyAudit(db)
  record('audit chain after the run', chain.problem === null ? 'whole' : 'BROKEN', `(${fmt(chain.rows)} rows walked)`)

  const store = `${settings}, a fresh schema; 2 server processes on loopback (LOG_LEVEL=warn, other settings default), the load generator in this process on the same cores`
  const note = [
    `Through A and B together the store took ${fmt(both.perSecond / one.perSecond, 2)}x the writes of A alone. Every write takes the one`,
    'revision row (UPDATE store_revision) in its transaction and holds it until its COMMIT, so the commits of all replicas',
    'happen one after another: store-wide, writes are bounded by one transaction at a time from the bump to the COMMIT',
    "(the audit row, the change-feed row and NOTIFY, the commit's WAL flush), whatever the number of replicas. Within a",
    'process writes also run one at a time (WriteQueue), so one replica is bounded by its whole transaction; here the two',
    'servers, PostgreSQL and the load generator also share 2 cores. More replicas add check capacity, not write capacity.',
  ]
  return { store, note }
})
