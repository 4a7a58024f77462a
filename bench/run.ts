/**
 * npm run bench: the gateway's hot path measured in one run on this machine.
 * Compare ratios, not absolute figures: machines here are shared and noisy.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { cpus, totalmem } from 'node:os'
import autocannon from 'autocannon'
import type { PermissionEngine } from '../src/engine/engine.js'
import type { Database } from '../src/storage/db.js'
import { benchDatabase, benchService, benchSubject, measuredEngine, postgresUrl, seedRules } from './seed.js'

const gc = (globalThis as { gc?: () => void }).gc
const HTTP_SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 3)
const HTTP_ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? 9)
const rows: Array<[string, string, string]> = []
const record = (what: string, value: string, note = '') => {
  rows.push([what, value, note])
  process.stderr.write(`  ${what}: ${value} ${note}\n`)
}
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

/** Calls per second of `fn`, run for about `ms` (at least `minCalls` times). */
function rate(fn: (i: number) => unknown, ms: number, minCalls = 3): number {
  let calls = 0
  const started = performance.now()
  while (calls < minCalls || performance.now() - started < ms) {
    fn(calls)
    calls++
  }
  return calls / ((performance.now() - started) / 1000)
}

/**
 * Median time of applying one committed revoke and its grant back to the
 * engine in memory (Casbin + index), for stored rules picked at random: a
 * removal's cost may depend on where the row sits in Casbin's list, and the
 * rule just added is always last.
 */
async function writeCost(engine: PermissionEngine, db: Database): Promise<{ add: number; remove: number; slowest: number }> {
  const picked = await db.query<{ v0: string; v1: string; v2: string; v3: string; v4: string }>(
    "SELECT v0, v1, v2, v3, v4 FROM casbin_rule WHERE ptype = 'p' ORDER BY random() LIMIT 21",
  )
  const adds: number[] = []
  const removes: number[] = []
  for (const { v0, v1, v2, v3, v4 } of picked.rows) {
    const rule = [v0, v1, v2, v3, v4]
    let started = performance.now()
    await engine.removeRule('p', rule)
    removes.push(performance.now() - started)
    started = performance.now()
    await engine.addRule('p', rule)
    adds.push(performance.now() - started)
  }
  return { add: median(adds), remove: median(removes), slowest: Math.max(...removes) }
}

interface Seeded {
  db: Database
  schema: string | null
  drop: () => Promise<void>
}

async function seeded(rules: number): Promise<Seeded & { userId: string }> {
  const store = await benchDatabase()
  await seedRules(store.db, rules)
  const service = await benchService(store.db)
  const { userId } = await benchSubject(service)
  return { ...store, userId }
}

interface InProcess {
  indexRate: number
  enforceRate: number | null
  /** Index decisions per second over about `ms`, asked again on the same engine. */
  ask: (ms: number) => number
  store: Seeded & { userId: string }
}

async function inProcess(rules: number, withEnforce: boolean): Promise<InProcess> {
  const store = await seeded(rules)
  const { engine, loadMs, heapPerRule } = await measuredEngine(store.db)
  const subject = { id: store.userId, principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'role_0' }
  const questions = [
    ['m1', 'orders', 'read'],
    ['m1', 'payouts', 'approve'],
    ['m1', 'admin', 'register'],
    ['m1', 'nothing', 'here'],
  ] as const
  const ask = (ms: number) =>
    rate((i) => {
      const [domain, obj, act] = questions[i % questions.length] as (typeof questions)[number]
      return engine.decide(subject, domain, obj, act)
    }, ms)
  const indexRate = ask(1000)
  const enforceRate = withEnforce
    ? rate((i) => {
        const [domain, obj, act] = questions[i % questions.length] as (typeof questions)[number]
        return engine.enforce(subject.id, domain, obj, act)
      }, 1500)
    : null
  record(`decisions/s in process, index, ${fmt(rules)} rules`, fmt(indexRate))
  if (enforceRate !== null) {
    record(`decisions/s in process, enforceSync, ${fmt(rules)} rules`, fmt(enforceRate, 1))
    record(`index / enforceSync, ${fmt(rules)} rules`, `${fmt(indexRate / enforceRate, 0)}x`)
  }
  const writes = await writeCost(engine, store.db)
  record(
    `in-memory write, ${fmt(rules)} rules: add / remove one rule (checks wait this long)`,
    `${fmt(writes.add, 3)} / ${fmt(writes.remove, 3)} ms`,
    `(median of 21 stored rules picked at random; slowest removal ${fmt(writes.slowest, 3)} ms)`,
  )
  record(`heap per rule (Casbin model + index), ${fmt(rules)} rules`, `${fmt(heapPerRule)} B`, gc === undefined ? '(run with --expose-gc)' : '')
  record(`cold load of the engine, ${fmt(rules)} rules (${postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite'})`, `${fmt(loadMs)} ms`)
  return { indexRate, enforceRate, ask, store }
}

async function startServer(rules: number, schema: string | null): Promise<{ child: ChildProcess; port: number; token: string }> {
  const args = ['--import', 'tsx', new URL('./server.ts', import.meta.url).pathname, String(rules), ...(schema !== null ? [schema] : [])]
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: process.env })
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /READY (\d+) (\S+)/.exec(out)
      if (match !== null) resolve({ child, port: Number(match[1]), token: match[2] as string })
    })
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)))
  })
}

interface LoadRun {
  result: autocannon.Result
  /** Server CPU time (user + system) per request served, in microseconds. */
  cpuPerRequest: number
}

async function serverCpu(base: string): Promise<number> {
  return ((await (await fetch(`${base}/bench/cpu`)).json()) as { micros: number }).micros
}

async function load(base: string, path: string, token: string): Promise<LoadRun> {
  const before = await serverCpu(base)
  const result = await autocannon({ url: `${base}${path}`, connections: 32, pipelining: 1, duration: HTTP_SECONDS, headers: { authorization: `Bearer ${token}` } })
  const after = await serverCpu(base)
  return { result, cpuPerRequest: (after - before) / Math.max(1, result.requests.total) }
}

interface RouteFigures {
  rps: number
  p50: number
  p99: number
  cpuPerRequest: number
}

/** The median of each figure over the runs (each figure on its own). */
function summarise(runs: LoadRun[]): RouteFigures {
  return {
    rps: median(runs.map((r) => r.result.requests.average)),
    p50: median(runs.map((r) => r.result.latency.p50)),
    p99: median(runs.map((r) => r.result.latency.p99)),
    cpuPerRequest: median(runs.map((r) => r.cpuPerRequest)),
  }
}

const CHECK_PATH = '/v2/authz/check?obj=orders&act=read'
// The proxies' forward auth for the same pair with the caller's own token: 204 and identity headers, no body.
const VERIFY_PATH = '/v2/authz/verify?obj=orders&act=read'
const EMPTY_PATH = '/bench/empty'

interface Target {
  base: string
  path: string
  token: string
}

interface Server {
  base: string
  token: string
  stop: () => void
}

async function serve(rules: number, schema: string | null): Promise<Server> {
  const { child, port, token } = await startServer(rules, schema)
  return { base: `http://127.0.0.1:${port}`, token, stop: () => child.kill('SIGTERM') }
}

/**
 * Loads every target once per round, the order rotating from round to round,
 * after one warm-up each. Returns the runs per target, round by round, so
 * ratios can be taken within a round: the machine's load drifts over
 * seconds, and comparing runs made back to back cancels the drift.
 */
async function rounds(targets: Target[]): Promise<LoadRun[][]> {
  for (const target of targets) await load(target.base, target.path, target.token)
  const runs: LoadRun[][] = targets.map(() => [])
  for (let round = 0; round < HTTP_ROUNDS; round++) {
    for (let k = 0; k < targets.length; k++) {
      const t = (round + k) % targets.length
      const target = targets[t] as Target
      const run = await load(target.base, target.path, target.token)
      if (target.path !== EMPTY_PATH && run.result.non2xx > 0) throw new Error(`${run.result.non2xx} requests to ${target.path} failed`)
      ;(runs[t] as LoadRun[]).push(run)
    }
  }
  return runs
}

/** Median over the rounds of a figure of `a` divided by the same of `b`. */
function roundRatio(a: LoadRun[], b: LoadRun[], figure: (run: LoadRun) => number): number {
  return median(a.map((run, i) => figure(run) / figure(b[i] as LoadRun)))
}

const rps = (run: LoadRun) => run.result.requests.average
const perCpuSecond = (run: LoadRun) => 1 / run.cpuPerRequest

const latency = (f: RouteFigures) => `(${f.p50} / ${f.p99}; ${fmt(f.cpuPerRequest, 1)} µs CPU)`

const started = new Date()
const command = `npm run bench${postgresUrl !== undefined ? ' (DATABASE_URL=postgres://…)' : ''}`
process.stderr.write(`running ${command}\n`)

const small = await inProcess(1_000, true)
const medium = await inProcess(20_000, true)
await medium.store.drop()
const large = await inProcess(200_000, true)
await large.store.drop()

// The servers run side by side, so the 1k-rule and 1M-rule checks are compared round by round too.
const smallServer = await serve(1_000, small.store.schema)
const servers = [smallServer]
const targets: Target[] = [
  { base: smallServer.base, path: EMPTY_PATH, token: smallServer.token },
  { base: smallServer.base, path: CHECK_PATH, token: smallServer.token },
  { base: smallServer.base, path: VERIFY_PATH, token: smallServer.token },
]
let huge: InProcess | null = null
if (postgresUrl !== undefined) {
  huge = await inProcess(1_000_000, false)
  // The two engines asked in turn, several times, so both sides of the ratio see the same machine.
  const ratios: number[] = []
  for (let i = 0; i < 7; i++) ratios.push(small.ask(400) / huge.ask(400))
  record('index decisions/s, 1k rules / 1M rules (asked in turn, median of 7)', fmt(median(ratios), 2), '(target <= 1.2)')
  const hugeServer = await serve(1_000_000, huge.store.schema)
  servers.push(hugeServer)
  targets.push({ base: hugeServer.base, path: CHECK_PATH, token: hugeServer.token })
}
try {
  const [empty, check, verify, checkHuge] = (await rounds(targets)) as [LoadRun[], LoadRun[], LoadRun[], LoadRun[] | undefined]
  record('HTTP empty JSON route, same size, req/s (p50 / p99 ms; server CPU per request)', fmt(summarise(empty).rps), latency(summarise(empty)))
  record('HTTP GET /v2/authz/check, 1,000 rules, req/s (p50 / p99 ms; server CPU per request)', fmt(summarise(check).rps), latency(summarise(check)))
  record('check / empty route, req/s (median of the rounds)', fmt(roundRatio(check, empty, rps), 2), '(target >= 0.85)')
  record('check / empty route, requests per server CPU second (median of the rounds)', fmt(roundRatio(check, empty, perCpuSecond), 2), '(the same ratio, less sensitive to other load)')
  record('HTTP GET /v2/authz/verify, 1,000 rules, req/s (p50 / p99 ms; server CPU per request)', fmt(summarise(verify).rps), latency(summarise(verify)))
  record('verify / empty route, req/s (median of the rounds)', fmt(roundRatio(verify, empty, rps), 2), '(target >= 0.85)')
  record('verify / empty route, requests per server CPU second (median of the rounds)', fmt(roundRatio(verify, empty, perCpuSecond), 2), '(the same ratio, less sensitive to other load)')
  if (checkHuge !== undefined) {
    record('HTTP GET /v2/authz/check, 1,000,000 rules, req/s (p50 / p99 ms; server CPU per request)', fmt(summarise(checkHuge).rps), latency(summarise(checkHuge)))
    record('check throughput, 1k rules / 1M rules (median of the rounds)', fmt(roundRatio(check, checkHuge, rps), 2), '(target <= 1.2)')
  } else {
    record('1M rules', 'skipped', '(set DATABASE_URL=postgres://… for the 1M-rule figures)')
  }
} finally {
  for (const server of servers) server.stop()
  await small.store.drop()
  await huge?.store.drop()
}

const cpu = cpus()[0]?.model ?? 'unknown CPU'
process.stdout.write(
  [
    `command: ${command}`,
    `date: ${started.toISOString()}`,
    `machine: ${cpus().length} × ${cpu}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
    `store: ${postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite (in memory)'}; HTTP: autocannon, 32 connections, ${HTTP_SECONDS} s per run, ${HTTP_ROUNDS} rounds of every route in turn, medians`,
    '',
    '| measure | value | note |',
    '|---|---:|---|',
    ...rows.map(([what, value, note]) => `| ${what} | ${value} | ${note} |`),
    '',
  ].join('\n'),
)
process.exit(0)
