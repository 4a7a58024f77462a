/**
 * npm run bench:replicas: two server processes over one PostgreSQL schema,
 * measured over HTTP on loopback. A fresh schema of DATABASE_URL's database
 * is made for the run and dropped at the end; both processes are stopped
 * whatever happens. Without a PostgreSQL DATABASE_URL there is nothing to
 * measure (the embedded store serves one process).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { Agent, request } from 'node:http'
import { createServer } from 'node:net'
import { cpus, loadavg, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'
import { verifyAudit } from '../src/commands/verifyAudit.js'
import type { Database } from '../src/storage/db.js'
import { openPostgres } from '../src/storage/pg.js'

const postgresUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined
if (postgresUrl === undefined) {
  process.stderr.write(
    'npm run bench:replicas needs PostgreSQL: set DATABASE_URL=postgres://user:pass@host:5432/db (a schema is created in it for the run and dropped afterwards)\n',
  )
  process.exit(1)
}

const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))
const SECRET = 'bench-replicas-secret-0123456789abcdef'
const ROOT_EMAIL = 'root@replicas.bench'
const ROOT_PASSWORD = `bench-${randomBytes(6).toString('hex')}`
/** Past this the run is abandoned (and cleaned up): it must stay bounded. */
const WHOLE_RUN_MS = 240_000
const PROPAGATION_SAMPLES = 200
const STALE_ROUNDS = 500
const THROUGHPUT_MS = 5000
const CLIENTS_PER_REPLICA = 8
const STEADY_RATE = 50
const STEADY_MS = 10_000

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number
}

// ---------------------------------------------------------------- HTTP

/** Keep-alive sockets: a tight check loop should measure the service, not connection set-up. */
const agent = new Agent({ keepAlive: true, maxSockets: 64 })

interface Reply {
  status: number
  code: string | undefined
  data: Record<string, unknown>
  /** `x-policy-revision` */
  policyRevision: number
  ms: number
}

function send(port: number, method: 'GET' | 'POST' | 'DELETE', path: string, token: string | null, body?: unknown): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body)
  const started = performance.now()
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        timeout: 15_000,
        headers: {
          ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
          ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          let envelope: { response_code?: string; data?: Record<string, unknown> } = {}
          try {
            envelope = JSON.parse(Buffer.concat(chunks).toString()) as typeof envelope
          } catch {
            // not JSON: the status says enough
          }
          resolve({
            status: res.statusCode ?? 0,
            code: envelope.response_code,
            data: envelope.data ?? {},
            policyRevision: Number(res.headers['x-policy-revision']),
            ms: performance.now() - started,
          })
        })
        res.on('error', reject)
      },
    )
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 15 s`)))
    req.on('error', reject)
    req.end(payload)
  })
}

// ---------------------------------------------------------------- processes

interface Replica {
  name: string
  port: number
  child: ChildProcess
  /** The end of its output, for failure messages. */
  output(): string
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

const started: Replica[] = []

async function startReplica(name: string, databaseUrl: string): Promise<Replica> {
  const port = await freePort()
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: databaseUrl,
    JWT_SECRET: SECRET,
    BOOTSTRAP_ADMIN_EMAIL: ROOT_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: ROOT_PASSWORD,
    LOGIN_RATE_LIMIT_PER_MINUTE: '1000',
    // Request logs would cost the servers CPU this 2-core machine shares with the load generator and PostgreSQL.
    LOG_LEVEL: 'warn',
  }
  // A process group of its own, so that stopping it stops whatever it started too.
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/http/server.ts'], {
    cwd: repositoryRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let output = ''
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  const replica: Replica = { name, port, child, output: () => output }
  started.push(replica)
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited while starting:\n${output}`)
    try {
      if ((await send(port, 'GET', '/healthz', null)).status === 200) return replica
    } catch {
      // not listening yet
    }
    await sleep(100)
  }
  throw new Error(`${name} did not answer /healthz within 60 s:\n${output}`)
}

function signalGroup(replica: Replica, signal: NodeJS.Signals): void {
  if (replica.child.pid === undefined) return
  try {
    process.kill(-replica.child.pid, signal)
  } catch {
    // already gone
  }
}

async function stopAll(): Promise<void> {
  await Promise.all(
    started.map(async (replica) => {
      if (replica.child.exitCode !== null || replica.child.signalCode !== null) return
      const exited = new Promise<void>((resolve) => replica.child.once('exit', () => resolve()))
      signalGroup(replica, 'SIGTERM')
      const timer = setTimeout(() => signalGroup(replica, 'SIGKILL'), 10_000)
      await exited
      clearTimeout(timer)
    }),
  )
  started.length = 0
}

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

const rows: Array<[string, string, string]> = []
const record = (what: string, value: string, note = '') => {
  rows.push([what, value, note])
  process.stderr.write(`  ${what}: ${value} ${note}\n`)
}

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

/** Arrival times of a change stream's events by revision: a stream on `replica` from `after`, read as it arrives. */
function followStream(replica: Replica, after: number): { arrivals: Map<number, number>; close(): void } {
  const arrivals = new Map<number, number>()
  const req = request({ host: '127.0.0.1', port: replica.port, path: `/v2/admin/changes/stream?after=${after}`, headers: { authorization: `Bearer ${token}` } })
  req.on('response', (res) => {
    let rest = ''
    res.setEncoding('utf8')
    res.on('data', (chunk: string) => {
      const now = performance.now()
      const lines = (rest + chunk).split('\n')
      rest = lines.pop() ?? ''
      for (const line of lines) if (line.startsWith('id: ')) arrivals.set(Number(line.slice(4).split('.')[0]), now)
    })
  })
  req.on('error', () => undefined)
  req.end()
  return { arrivals, close: () => req.destroy() }
}

/** From the write's answer on A until B's change stream delivers its event (B applies it from the feed first). */
async function streamDelivery(a: Replica, b: Replica, samples: number): Promise<number[]> {
  const head = await send(a.port, 'GET', '/v2/admin/changes?limit=1', token)
  const stream = followStream(b, Number(head.data.next_after))
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

const startedAt = new Date()
// Other work on a shared machine shows in the tails: the load before the run is printed with the figures.
const loadBefore = loadavg()
const command = 'npm run bench:replicas (DATABASE_URL=postgres://…)'
process.stderr.write(`running ${command}\n`)

const run = randomBytes(4).toString('hex')
const schema = `bench_replicas_${run}`
const admin = openPostgres({ url: postgresUrl, max: 1 })
let db: Database | null = null
let cleaned: Promise<void> | null = null

/** Stops both processes and drops the schema; safe to call more than once. */
function cleanUp(): Promise<void> {
  cleaned ??= (async () => {
    await stopAll()
    await db?.close().catch(() => undefined)
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch((error: unknown) => {
      process.stderr.write(`could not drop schema ${schema}: ${String(error)}\n`)
    })
    await admin.close().catch(() => undefined)
    agent.destroy()
  })()
  return cleaned
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`${signal}: stopping the servers and dropping ${schema}\n`)
    void cleanUp().then(() => process.exit(130))
  })
}
const watchdog = setTimeout(() => {
  process.stderr.write(`the run took longer than ${WHOLE_RUN_MS / 1000} s: abandoned\n`)
  void cleanUp().then(() => process.exit(1))
}, WHOLE_RUN_MS)
watchdog.unref()

function processUrl(name: string): string {
  const url = new URL(postgresUrl as string)
  url.searchParams.set('options', `-c search_path=${schema}`)
  // Named per run and process: an operator can tell them apart in pg_stat_activity.
  url.searchParams.set('application_name', `aps-bench-${run}-${name}`)
  return url.toString()
}

let failure: unknown = null
let header: string[] = []
let note: string[] = []
try {
  await admin.query(`CREATE SCHEMA ${schema}`)
  db = openPostgres({ url: postgresUrl, schema, max: 2 })
  const settings = (
    await admin.query<{ version: string; sync: string }>(
      "SELECT current_setting('server_version') AS version, current_setting('synchronous_commit') AS sync",
    )
  ).rows[0]

  // A first: it applies the migrations and creates the root account.
  const a = await startReplica('A', processUrl('a'))
  const b = await startReplica('B', processUrl('b'))

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

  header = [
    `command: ${command}`,
    `date: ${startedAt.toISOString()}`,
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
    `store: PostgreSQL ${settings?.version ?? '?'} (synchronous_commit=${settings?.sync ?? '?'}), a fresh schema; 2 server processes on loopback (LOG_LEVEL=warn, other settings default), the load generator in this process on the same cores`,
    `load average before the run (1/5/15 min): ${loadBefore.map((l) => fmt(l, 2)).join(' / ')}`,
  ]
  note = [
    `Through A and B together the store took ${fmt(both.perSecond / one.perSecond, 2)}x the writes of A alone. Every write takes the one`,
    'revision row (UPDATE store_revision) in its transaction and holds it until its COMMIT, so the commits of all replicas',
    'happen one after another: store-wide, writes are bounded by one transaction at a time from the bump to the COMMIT',
    "(the audit row, the change-feed row and NOTIFY, the commit's WAL flush), whatever the number of replicas. Within a",
    'process writes also run one at a time (WriteQueue), so one replica is bounded by its whole transaction; here the two',
    'servers, PostgreSQL and the load generator also share 2 cores. More replicas add check capacity, not write capacity.',
  ]
} catch (error) {
  failure = error
  for (const replica of started) process.stderr.write(`--- ${replica.name}'s last output ---\n${replica.output()}\n`)
} finally {
  await cleanUp()
  clearTimeout(watchdog)
}

if (failure !== null) {
  process.stderr.write(`bench:replicas failed: ${failure instanceof Error ? failure.message : String(failure)}\n`)
  process.exit(1)
}

process.stdout.write(
  [
    ...header,
    '',
    '| measure | value | note |',
    '|---|---:|---|',
    ...rows.map(([what, value, note]) => `| ${what} | ${value} | ${note} |`),
    '',
    ...note,
    '',
  ].join('\n'),
)
process.exit(0)
