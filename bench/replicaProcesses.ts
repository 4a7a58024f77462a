/**
 * What the benchmarks over two server processes share (bench:replicas,
 * bench:writes): a fresh PostgreSQL schema for the run, dropped at the end;
 * the server processes, each in a process group of its own, stopped whatever
 * happens; HTTP calls on keep-alive sockets; figures.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { createServer } from 'node:net'
import { cpus, loadavg, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'
import type { Database } from '../src/storage/db.js'
import { openPostgres } from '../src/storage/pg.js'

const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))
const SECRET = 'bench-replicas-secret-0123456789abcdef'
export const ROOT_EMAIL = 'root@replicas.bench'
export const ROOT_PASSWORD = `bench-${randomBytes(6).toString('hex')}`

export const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number
}

// ---------------------------------------------------------------- HTTP

/** Keep-alive sockets: a tight check loop should measure the service, not connection set-up. */
export const agent = new Agent({ keepAlive: true, maxSockets: 64 })

export interface Reply {
  status: number
  code: string | undefined
  data: Record<string, unknown>
  /** `x-policy-revision` */
  policyRevision: number
  ms: number
}

export function send(port: number, method: 'GET' | 'POST' | 'DELETE', path: string, token: string | null, body?: unknown): Promise<Reply> {
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

export interface Replica {
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

export const started: Replica[] = []

export async function startReplica(name: string, databaseUrl: string, settings: Record<string, string> = {}): Promise<Replica> {
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
    ...settings,
  }
  // BENCH_CPU_PROF=<folder>: each server writes a V8 CPU profile there when it stops (where a write's CPU goes).
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`, `--cpu-prof-name=${name}-${port}.cpuprofile`] : []
  // A process group of its own, so that stopping it stops whatever it started too.
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'src/http/server.ts'], {
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

export async function stopAll(): Promise<void> {
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

// ---------------------------------------------------------------- CPU time

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); 0 when it is gone or unreadable. */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return 0
  }
}

/** USER_HZ, 100 on every Linux this runs on. */
const CLOCK_TICKS = 100

/**
 * The PostgreSQL processes a run's CPU time is read from: the run's own
 * backends (named by processUrl) and the server's background processes (WAL
 * writer, checkpointer, ...), which work for every session on the server.
 */
export async function postgresPids(admin: Database, run: string): Promise<number[]> {
  const { rows } = await admin.query<{ pid: number }>(
    "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1 OR backend_type <> 'client backend'",
    [`%-${run}-%`],
  )
  return rows.map((row) => row.pid)
}

/** CPU seconds of each party, read before and after a phase. */
export interface CpuSample {
  servers: number[]
  postgres: number
  generator: number
}

export function sampleCpu(servers: readonly Replica[], postgres: readonly number[]): CpuSample {
  const usage = process.cpuUsage()
  return {
    servers: servers.map((server) => processCpuSeconds(server.child.pid ?? 0)),
    postgres: postgres.reduce((sum, pid) => sum + processCpuSeconds(pid), 0),
    generator: (usage.user + usage.system) / 1e6,
  }
}

/** Each party's CPU milliseconds per write between two samples. */
export function cpuPerWrite(before: CpuSample, after: CpuSample, writes: number): { servers: number[]; postgres: number; generator: number; total: number } {
  const per = (seconds: number) => (seconds * 1000) / Math.max(1, writes)
  const servers = after.servers.map((s, i) => per(s - (before.servers[i] ?? 0)))
  const postgres = per(after.postgres - before.postgres)
  const generator = per(after.generator - before.generator)
  return { servers, postgres, generator, total: servers.reduce((a, b) => a + b, 0) + postgres + generator }
}

// ---------------------------------------------------------------- the run

/** One run's schema of its own, and what ends the run cleanly: on success, failure, a signal, or past its bound. */
export interface BenchRun {
  run: string
  schema: string
  admin: Database
  /** A DATABASE_URL for one server process: the run's schema, and a name for pg_stat_activity. */
  processUrl(name: string): string
  /** Done before the schema is dropped (closing the run's own connections). */
  beforeDrop(step: () => Promise<void>): void
  /** Stops the processes and drops the schema; safe to call more than once. */
  cleanUp(): Promise<void>
}

export function benchRun(postgresUrl: string, prefix: string, wholeRunMs: number): BenchRun {
  const run = randomBytes(4).toString('hex')
  const schema = `${prefix}_${run}`
  const admin = openPostgres({ url: postgresUrl, max: 1 })
  const steps: Array<() => Promise<void>> = []
  let cleaned: Promise<void> | null = null
  const cleanUp = (): Promise<void> => {
    cleaned ??= (async () => {
      await stopAll()
      for (const step of steps) await step().catch(() => undefined)
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
    process.stderr.write(`the run took longer than ${wholeRunMs / 1000} s: abandoned\n`)
    void cleanUp().then(() => process.exit(1))
  }, wholeRunMs)
  watchdog.unref()
  return {
    run,
    schema,
    admin,
    processUrl(name) {
      const url = new URL(postgresUrl)
      url.searchParams.set('options', `-c search_path=${schema}`)
      // Named per run and process: an operator can tell them apart in pg_stat_activity.
      url.searchParams.set('application_name', `aps-${prefix}-${run}-${name}`)
      return url.toString()
    },
    beforeDrop(step) {
      steps.push(step)
    },
    cleanUp: async () => {
      await cleanUp()
      clearTimeout(watchdog)
    },
  }
}

/** DATABASE_URL when it names PostgreSQL; otherwise the script says what it needs and exits. */
export function requirePostgres(script: string): string {
  const url = process.env.DATABASE_URL
  if (url?.startsWith('postgres') === true) return url
  process.stderr.write(
    `npm run ${script} needs PostgreSQL: set DATABASE_URL=postgres://user:pass@host:5432/db (a schema is created in it for the run and dropped afterwards)\n`,
  )
  process.exit(1)
}

/** When each revision's first event arrived on a server's change stream, from `after` on, read as it arrives. */
export function followStream(replica: Replica, after: number, token: string): { arrivals: Map<number, number>; close(): void } {
  const arrivals = new Map<number, number>()
  const req = request({ host: '127.0.0.1', port: replica.port, path: `/v2/admin/changes/stream?after=${after}`, headers: { authorization: `Bearer ${token}` } })
  req.on('response', (res) => {
    let rest = ''
    res.setEncoding('utf8')
    res.on('data', (chunk: string) => {
      const now = performance.now()
      const lines = (rest + chunk).split('\n')
      rest = lines.pop() ?? ''
      for (const line of lines) {
        if (!line.startsWith('id: ')) continue
        const revision = Number(line.slice(4).split('.')[0])
        if (!arrivals.has(revision)) arrivals.set(revision, now)
      }
    })
  })
  req.on('error', () => undefined)
  req.end()
  return { arrivals, close: () => req.destroy() }
}

/** A run's rows (each also shown on stderr as it is measured), and the lines that say where and when they were measured. */
export class BenchReport {
  private readonly rows: Array<[string, string, string]> = []
  private readonly startedAt = new Date()
  // Other work on a shared machine shows in the tails: the load before the run is printed with the figures.
  private readonly loadBefore = loadavg()

  constructor(readonly command: string) {
    process.stderr.write(`running ${command}\n`)
  }

  record(what: string, value: string, note = ''): void {
    this.rows.push([what, value, note])
    process.stderr.write(`  ${what}: ${value} ${note}\n`)
  }

  /** The report as markdown: the run's header, the `store` line, the table, then `note`'s lines. */
  text(store: string, note: readonly string[] = []): string {
    return [
      `command: ${this.command}`,
      `date: ${this.startedAt.toISOString()}`,
      `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
      `store: ${store}`,
      `load average before the run (1/5/15 min): ${this.loadBefore.map((l) => fmt(l, 2)).join(' / ')}`,
      '',
      '| measure | value | note |',
      '|---|---:|---|',
      ...this.rows.map(([what, value, n]) => `| ${what} | ${value} | ${n} |`),
      '',
      ...note,
      ...(note.length > 0 ? [''] : []),
    ].join('\n')
  }
}

/** The server's version and commit setting, for the report's `store` line. */
export async function postgresSettings(admin: Database): Promise<string> {
  const settings = (await admin.query<{ version: string; sync: string }>("SELECT current_setting('server_version') AS version, current_setting('synchronous_commit') AS sync")).rows[0]
  return `PostgreSQL ${settings?.version ?? '?'} (synchronous_commit=${settings?.sync ?? '?'})`
}

/**
 * Runs `measure`, then stops the processes and drops the schema whatever
 * happened, and ends the process: the report on stdout, or why it failed
 * (with the servers' last output) on stderr.
 */
export async function runBench(bench: BenchRun, report: BenchReport, script: string, measure: () => Promise<{ store: string; note?: string[] }>): Promise<never> {
  let outcome: { store: string; note?: string[] }
  try {
    outcome = await measure()
  } catch (error) {
    for (const replica of started) process.stderr.write(`--- ${replica.name}'s last output ---\n${replica.output()}\n`)
    await bench.cleanUp()
    process.stderr.write(`${script} failed: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  }
  await bench.cleanUp()
  process.stdout.write(report.text(outcome.store, outcome.note))
  process.exit(0)
}
