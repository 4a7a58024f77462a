/**
 * npm run bench: the gateway's hot path measured in one run on this machine.
 * Compare ratios, not absolute figures: machines here are shared and noisy.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { cpus, totalmem } from 'node:os'
import autocannon from 'autocannon'
import { PermissionEngine } from '../src/engine/engine.js'
import { readModel } from '../src/engine/model.js'
import { listCatalog } from '../src/storage/catalog.js'
import { listSubRoles } from '../src/storage/subRoles.js'
import type { Database } from '../src/storage/db.js'
import { benchDatabase, benchService, benchSubject, postgresUrl, seedRules } from './seed.js'

const gc = (globalThis as { gc?: () => void }).gc
const HTTP_SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 8)
const rows: Array<[string, string, string]> = []
const record = (what: string, value: string, note = '') => {
  rows.push([what, value, note])
  process.stderr.write(`  ${what}: ${value} ${note}\n`)
}
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

async function engineFor(db: Database): Promise<{ engine: PermissionEngine; loadMs: number; heapPerRule: number }> {
  const model = readModel(new URL('../model.conf', import.meta.url).pathname)
  const state = { rootRoles: (await listSubRoles(db)).filter((r) => r.is_root).map((r) => r.code), catalog: await listCatalog(db) }
  gc?.()
  const before = process.memoryUsage().heapUsed
  const started = performance.now()
  const engine = await PermissionEngine.load(db, model.text, state)
  const loadMs = performance.now() - started
  gc?.()
  const rules = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')).rows[0]?.n ?? 1
  return { engine, loadMs, heapPerRule: (process.memoryUsage().heapUsed - before) / rules }
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

async function inProcess(rules: number, withEnforce: boolean): Promise<{ indexRate: number; enforceRate: number | null; store: Seeded & { userId: string } }> {
  const store = await seeded(rules)
  const { engine, loadMs, heapPerRule } = await engineFor(store.db)
  const subject = { id: store.userId, principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'role_0' }
  const questions = [
    ['m1', 'orders', 'read'],
    ['m1', 'payouts', 'approve'],
    ['m1', 'admin', 'register'],
    ['m1', 'nothing', 'here'],
  ] as const
  const indexRate = rate((i) => {
    const [domain, obj, act] = questions[i % questions.length] as (typeof questions)[number]
    return engine.decide(subject, domain, obj, act)
  }, 1000)
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
  record(`heap per rule (Casbin model + index), ${fmt(rules)} rules`, `${fmt(heapPerRule)} B`, gc === undefined ? '(run with --expose-gc)' : '')
  record(`cold load of the engine, ${fmt(rules)} rules (${postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite'})`, `${fmt(loadMs)} ms`)
  return { indexRate, enforceRate, store }
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

async function load(url: string, token: string): Promise<autocannon.Result> {
  return autocannon({ url, connections: 32, pipelining: 1, duration: HTTP_SECONDS, headers: { authorization: `Bearer ${token}` } })
}

async function http(rules: number, schema: string | null): Promise<{ check: autocannon.Result; empty: autocannon.Result }> {
  const { child, port, token } = await startServer(rules, schema)
  try {
    const base = `http://127.0.0.1:${port}`
    const checkUrl = `${base}/v2/authz/check?obj=orders&act=read`
    // Warm-ups, not recorded; then the two routes alternate twice and the better run of each counts.
    await load(`${base}/bench/empty`, token)
    await load(checkUrl, token)
    const runs: Array<{ empty: autocannon.Result; check: autocannon.Result }> = []
    for (let i = 0; i < 2; i++) runs.push({ empty: await load(`${base}/bench/empty`, token), check: await load(checkUrl, token) })
    const best = (pick: (r: (typeof runs)[number]) => autocannon.Result) =>
      runs.map(pick).reduce((a, b) => (b.requests.average > a.requests.average ? b : a))
    const empty = best((r) => r.empty)
    const check = best((r) => r.check)
    if (check.non2xx > 0) throw new Error(`${check.non2xx} check requests failed`)
    return { check, empty }
  } finally {
    child.kill('SIGTERM')
  }
}

const started = new Date()
const command = `npm run bench${postgresUrl !== undefined ? ' (DATABASE_URL=postgres://…)' : ''}`
process.stderr.write(`running ${command}\n`)

const small = await inProcess(1_000, true)
const medium = await inProcess(20_000, true)
await medium.store.drop()
const large = await inProcess(200_000, true)
await large.store.drop()

const httpSmall = await http(1_000, small.store.schema)
await small.store.drop()
const ratio = httpSmall.check.requests.average / httpSmall.empty.requests.average
record('HTTP empty JSON route, same size, req/s (p50 / p99 ms)', fmt(httpSmall.empty.requests.average), `(${httpSmall.empty.latency.p50} / ${httpSmall.empty.latency.p99})`)
record('HTTP GET /v2/authz/check, 1,000 rules, req/s (p50 / p99 ms)', fmt(httpSmall.check.requests.average), `(${httpSmall.check.latency.p50} / ${httpSmall.check.latency.p99})`)
record('check / empty route', fmt(ratio, 2), '(target >= 0.85)')

if (postgresUrl !== undefined) {
  const huge = await inProcess(1_000_000, false)
  record('index decisions/s, 1k rules / 1M rules', fmt(small.indexRate / huge.indexRate, 2), '(target <= 1.2)')
  const httpHuge = await http(1_000_000, huge.store.schema)
  await huge.store.drop()
  record('HTTP GET /v2/authz/check, 1,000,000 rules, req/s (p50 / p99 ms)', fmt(httpHuge.check.requests.average), `(${httpHuge.check.latency.p50} / ${httpHuge.check.latency.p99})`)
  record('check throughput, 1k rules / 1M rules', fmt(httpSmall.check.requests.average / httpHuge.check.requests.average, 2), '(target <= 1.2)')
} else {
  record('1M rules', 'skipped', '(set DATABASE_URL=postgres://… for the 1M-rule figures)')
}

const cpu = cpus()[0]?.model ?? 'unknown CPU'
process.stdout.write(
  [
    `command: ${command}`,
    `date: ${started.toISOString()}`,
    `machine: ${cpus().length} × ${cpu}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
    `store: ${postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite (in memory)'}; HTTP: autocannon, 32 connections, ${HTTP_SECONDS} s per run`,
    '',
    '| measure | value | note |',
    '|---|---:|---|',
    ...rows.map(([what, value, note]) => `| ${what} | ${value} | ${note} |`),
    '',
  ].join('\n'),
)
process.exit(0)
