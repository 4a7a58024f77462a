/**
 * npm run bench: the gateway's hot path measured in one run on this machine.
 * Compare ratios, not absolute figures: machines here are shared and noisy.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { buildRunner, loadPhasesApart, spawnToReady } from './coldStart.js'
import { EDITED_MATCHER, writeEditedModel } from './editedModel.js'
import { load, median, rounds, roundRatios, spawnServer, type LoadRun, type Server, type Target, type Variant } from './http.js'
import { topFrames } from './profile.js'
import type { PermissionEngine } from '../src/engine/engine.js'
import type { Database } from '../src/storage/db.js'
import { BATCH, benchDatabase, benchService, benchSubject, measuredEngine, postgresUrl, seedRules } from './seed.js'

const gc = (globalThis as { gc?: () => void }).gc
/** BENCH_QUICK=1 (or --quick): the 1k-rule figures only, shorter and fewer rounds; a few minutes. */
const QUICK = process.env.BENCH_QUICK === '1' || process.argv.includes('--quick')
const HTTP_SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? (QUICK ? 2 : 3))
const HTTP_ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? (QUICK ? 3 : 7))
/** Load on each route of a fresh server process before its measured run. */
const WARM_SECONDS = Number(process.env.BENCH_WARM_SECONDS ?? 4)
/**
 * BENCH_ROUTES=check,denies,…: only these HTTP rows beside the bare route, and nothing else (no other size,
 * profile or script): an A/B of the hot path in a few minutes. The names are ROUTE_KEYS'.
 */
const ROUTES = process.env.BENCH_ROUTES === undefined ? null : new Set(process.env.BENCH_ROUTES.split(',').map((name) => name.trim()))
const ROUTE_KEYS = ['healthz', 'check', 'verify', 'verify-headers', 'verify-prefix', 'batch', 'denies', 'all', 'shadow'] as const
type RouteKey = (typeof ROUTE_KEYS)[number]
for (const name of ROUTES ?? []) if (!(ROUTE_KEYS as readonly string[]).includes(name)) throw new Error(`BENCH_ROUTES: ${name} is not one of ${ROUTE_KEYS.join(', ')}`)
const measured = (key: RouteKey): boolean => ROUTES === null || ROUTES.has(key)
const NARROW = ROUTES !== null
/**
 * BENCH_BASELINE=<another checkout of the service> (its node_modules in place): that checkout's server too, each
 * measured row twice in the same rounds, marked `(baseline)`: a change and what it changes, under the same load.
 */
const BASELINE = process.env.BENCH_BASELINE
const rows: Array<[string, string, string]> = []
const record = (what: string, value: string, note = '') => {
  rows.push([what, value, note])
  process.stderr.write(`  ${what}: ${value} ${note}\n`)
}
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })


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

const CHECK_PATH = '/v2/authz/check?obj=orders&act=read'

/** BENCH_ROUTES' names of appTargets' rows, in their order. */
const APP_ROUTES: readonly RouteKey[] = ['healthz', 'check', 'verify', 'verify-headers', 'verify-prefix', 'batch']

type Ask = Omit<Target, 'server'>

/** The routes measured against the bare Fastify route, each with what its answer must be. */
function appTargets(label = ''): Ask[] {
  const all: Ask[] = [
    { name: `GET /healthz${label}`, path: '/healthz', status: 200 },
    { name: `GET /v2/authz/check${label}`, path: CHECK_PATH, status: 200 },
    // Forward auth for the same pair with the caller's own token: 204 and identity headers, no body.
    { name: `GET /v2/authz/verify (query)${label}`, path: '/v2/authz/verify?obj=orders&act=read', status: 204 },
    { name: `GET /v2/authz/verify (X-Authz-* headers)${label}`, path: '/v2/authz/verify', headers: { 'x-authz-obj': 'orders', 'x-authz-act': 'read' }, status: 204 },
    // The prefix form (Envoy): the original request after the prefix, decided by gateway/routes.example.json.
    { name: `GET /v2/authz/verify/* (prefix)${label}`, path: '/v2/authz/verify/api/orders/17', status: 200 },
    { name: `POST /v2/authz/check-batch, 100 checks${label}`, path: '/v2/authz/check-batch', method: 'POST', body: BATCH, decisions: 100, status: 200 },
  ]
  return all.filter((_, i) => measured(APP_ROUTES[i] as RouteKey))
}

const rps = (run: LoadRun) => run.rps
const perCpuSecond = (run: LoadRun) => 1 / run.cpuPerRequest

/** Profiles one route on a server of its own: the top ten frames by self time, per request. */
async function profileRoute(rules: number, schema: string | null, name: string, ask: Omit<Target, 'name' | 'server'>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'aps-prof-'))
  const server = await spawnServer('./server.ts', [String(rules), ...(schema !== null ? [schema] : [])], ['--cpu-prof', `--cpu-prof-dir=${dir}`])
  const target: Target = { ...ask, name: `${name} (profiled)`, server }
  await load(target, 2)
  const from = Number(process.hrtime.bigint() / 1000n)
  const run = await load(target, HTTP_SECONDS)
  const to = Number(process.hrtime.bigint() / 1000n)
  await server.stop()
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))
  if (file === undefined) throw new Error('the profiled server wrote no profile')
  // Only the samples of the measured run: the start-up and the warm-up are left out.
  const frames = topFrames(join(dir, file), from, to, Math.round(run.rps * HTTP_SECONDS))
  rmSync(dir, { recursive: true, force: true })
  profileLines.push(
    '',
    `CPU profile of ${name} (node --cpu-prof on the server, ${fmt(rules)} rules, the samples of one ${HTTP_SECONDS} s run after a warm-up): top ten frames by self time`,
    '',
    '| frame | self time, share of the profile | µs per request |',
    '|---|---:|---:|',
    ...frames.map((f) => `| \`${f.name}\` | ${fmt(f.share * 100, 1)}% | ${fmt(f.microsPerRequest, 2)} |`),
  )
}

/** The real app on `rules` rules (the schema of a seeded PostgreSQL store, or a fresh PGlite); this checkout's, or BENCH_BASELINE's. */
const serve = (rules: number, schema: string | null, env: NodeJS.ProcessEnv = {}, script = './server.ts'): Promise<Server> =>
  spawnServer(script, [String(rules), ...(schema !== null ? [schema] : [])], [], { ...process.env, ...env })
/** The checkouts whose app is measured: this one, and BENCH_BASELINE's (its rows' label, its server script). */
const checkouts: Array<[string, string]> = [['', './server.ts'], ...(BASELINE === undefined ? [] : [[' (baseline)', join(BASELINE, 'bench/server.ts')] as [string, string]])]

const profileLines: string[] = []
const httpLines: string[] = []

const started = new Date()
const command = `${QUICK ? 'BENCH_QUICK=1 ' : ''}${NARROW ? `BENCH_ROUTES=${[...(ROUTES ?? [])].join(',')} ` : ''}${BASELINE === undefined ? '' : 'BENCH_BASELINE=… '}${postgresUrl !== undefined ? 'DATABASE_URL=postgres://… ' : ''}npm run bench`
process.stderr.write(`running ${command}\n`)

const small = await inProcess(1_000, true)
if (!QUICK && !NARROW) {
  const medium = await inProcess(20_000, true)
  await medium.store.drop()
  const large = await inProcess(200_000, true)
  await large.store.drop()
}

// Every variant is a process started afresh in each round (see rounds()); the bare route's first.
const variants: Variant[] = [{ start: () => spawnServer('./bareFastify.ts', []), targets: [{ name: 'bare Fastify route (yardstick)', path: '/bare', status: 200 }] }]
const logDir = mkdtempSync(join(tmpdir(), 'aps-decisions-'))
const shadowModel = writeEditedModel()
for (const [label, script] of checkouts) {
  const app = appTargets(label)
  if (app.length > 0) variants.push({ start: () => serve(1_000, small.store.schema, {}, script), targets: app })
  // The check with the decision log writing to a file: `denies` (the default; the bench's allowed check writes nothing) and `all`.
  for (const mode of (['denies', 'all'] as const).filter(measured)) {
    variants.push({
      start: () => serve(1_000, small.store.schema, { DECISION_LOG: mode, DECISION_LOG_SINKS: `file:${join(logDir, `${mode}${label.length}.ndjson`)}` }, script),
      targets: [{ name: `GET /v2/authz/check, DECISION_LOG=${mode}, file sink${label}`, path: CHECK_PATH, status: 200 }],
    })
  }
  // The check with a shadow model comparing every decision (SHADOW_SAMPLE=1): the edited model, which answers as the shipped one.
  if (measured('shadow')) {
    variants.push({
      start: () => serve(1_000, small.store.schema, { SHADOW_MODEL_PATH: shadowModel.path, SHADOW_SAMPLE: '1' }, script),
      targets: [{ name: `GET /v2/authz/check, a shadow model comparing every decision${label}`, path: CHECK_PATH, status: 200 }],
    })
  }
}
let huge: InProcess | null = null
if (postgresUrl !== undefined && !QUICK && !NARROW) {
  huge = await inProcess(1_000_000, false)
  // The two engines asked in turn, several times, so both sides of the ratio see the same machine.
  const ratios: number[] = []
  for (let i = 0; i < 7; i++) ratios.push(small.ask(400) / huge.ask(400))
  record('index decisions/s, 1k rules / 1M rules (asked in turn, median of 7)', fmt(median(ratios), 2), '(target <= 1.2)')
  // Each form three times in turn, the median: one start is at the mercy of whatever else the machine does.
  buildRunner()
  const built: number[] = []
  const source: number[] = []
  const edited: number[] = []
  const editedModel = writeEditedModel()
  // Its decisions file is the shipped one, run at every start as production runs it.
  const editedEnv = { MODEL_PATH: editedModel.path, MODEL_DECISIONS_PATH: new URL('../model.decisions', import.meta.url).pathname }
  for (let i = 0; i < 3; i++) {
    built.push(await spawnToReady(huge.store.schema as string, 'built'))
    source.push(await spawnToReady(huge.store.schema as string, 'source'))
    edited.push(await spawnToReady(huge.store.schema as string, 'built', editedEnv))
  }
  editedModel.remove()
  record('cold start, 1M rules, spawn to /readyz (PostgreSQL), `node dist/http/server.js` as the image runs it (median of 3)', `${fmt(median(built))} ms`, '(target < 4,000)')
  record('cold start, 1M rules, spawn to /readyz (PostgreSQL), `npm start` (tsx compiles src/ as it loads; median of 3)', `${fmt(median(source))} ms`)
  record(
    `cold start, 1M rules, spawn to /readyz (PostgreSQL), \`node dist/http/server.js\`, edited model (\`${EDITED_MATCHER}\`, its decisions file run at start; median of 3)`,
    `${fmt(median(edited))} ms`,
    `(${fmt(median(edited) / median(built), 2)}x the shipped model's, started in turn; target <= 1.2x)`,
  )
  const phases = loadPhasesApart(huge.store.schema as string)
  record(`load step: read the rows through storage (query, transfer, parse), ${fmt(phases.rules)} rows`, `${fmt(phases.readMs)} ms`)
  record('load step: Casbin model filled from rows in memory', `${fmt(phases.casbinMs)} ms`, `(${fmt(phases.casbinHeapPerRule)} B heap per rule)`)
  record("load step: the model's row tables (for in-place changes; built in the background once the service is ready)", `${fmt(phases.rowTablesMs)} ms`)
  record('load step: decision index built from the rows', `${fmt(phases.indexMs)} ms`, `(${fmt(phases.indexHeapPerRule)} B heap per rule)`)
  const hugeSchema = huge.store.schema
  variants.push({ start: () => serve(1_000_000, hugeSchema), targets: [{ name: 'GET /v2/authz/check, 1M rules', path: CHECK_PATH, status: 200 }] })
}
/** The median of `values` and, beside it, their range: a reader sees how far the processes were apart. */
const withRange = (values: number[], digits: number, unit = '') =>
  `${fmt(median(values), digits)}${unit} (${fmt(Math.min(...values), digits)}-${fmt(Math.max(...values), digits)})`
const httpStarted = performance.now()
try {
  const runs = await rounds(variants, HTTP_SECONDS, HTTP_ROUNDS, WARM_SECONDS)
  const yardstick = runs[0] as LoadRun[]
  httpLines.push(
    '| route | req/s | decisions/s | p50 / p99 ms | server CPU per request (min-max over the processes) | req/s vs bare | req per CPU s vs bare (min-max over the rounds) |',
    '|---|---:|---:|---:|---:|---:|---:|',
  )
  variants
    .flatMap((variant) => variant.targets)
    .forEach((target, t) => {
      const mine = runs[t] as LoadRun[]
      const rate = median(mine.map(rps))
      httpLines.push(
        `| ${target.name} | ${fmt(rate)} | ${target.decisions === undefined ? '' : fmt(rate * target.decisions)} | ${median(mine.map((r) => r.p50))} / ${median(mine.map((r) => r.p99))} | ${withRange(mine.map((r) => r.cpuPerRequest), 1, ' µs')} | ${fmt(median(roundRatios(mine, yardstick, rps)), 2)} | ${withRange(roundRatios(mine, yardstick, perCpuSecond), 2)} |`,
      )
    })
} finally {
  rmSync(logDir, { recursive: true, force: true })
  shadowModel.remove()
}
const httpEnded = performance.now()
if (!NARROW) {
  await profileRoute(1_000, small.store.schema, 'GET /v2/authz/check', { path: CHECK_PATH, status: 200 })
  await profileRoute(1_000, small.store.schema, 'POST /v2/authz/check-batch, 100 checks', { path: '/v2/authz/check-batch', method: 'POST', body: BATCH, status: 200 })
}
await small.store.drop()
await huge?.store.drop()

/** A bench script of its own run to its end (each sizes its heap and seeds its own store); its table. */
const scriptTable = (script: string, args: string[] = []): string =>
  execFileSync(process.execPath, ['--max-old-space-size=8192', '--import', 'tsx', new URL(script, import.meta.url).pathname, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim()
// Edited models of the family: in process at 20k, 200k and 1M rules, and over HTTP beside the shipped model (PostgreSQL).
const editedLines: string[] = []
if (!QUICK && !NARROW) {
  process.stderr.write('edited models: npm run bench:family -- 1000 20000 200000 1000000\n')
  editedLines.push('', 'Edited models, in process (`npm run bench:family -- 1000 20000 200000 1000000`):', '', scriptTable('./family.ts', ['1000', '20000', '200000', '1000000']))
  if (postgresUrl !== undefined) {
    process.stderr.write('edited models: npm run bench:edited-http\n')
    editedLines.push('', 'Edited model over HTTP beside the shipped one (`npm run bench:edited-http`):', '', scriptTable('./editedHttp.ts'))
  }
}

// The shadow model's compare() per decision, in process (its HTTP row is in the table above).
const shadowLines = NARROW ? [] : ['', 'Shadow model, in process (`npm run bench:shadow`):', '', scriptTable('./shadow.ts')]

const cpu = cpus()[0]?.model ?? 'unknown CPU'
process.stdout.write(
  [
    `command: ${command}`,
    `date: ${started.toISOString()}`,
    `machine: ${cpus().length} × ${cpu}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
    `store: ${postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite (in memory)'}; HTTP: autocannon, 32 connections, ${HTTP_SECONDS} s per run after ${WARM_SECONDS} s of warm-up, ${HTTP_ROUNDS} rounds of every route in turn, medians; each round with fresh server processes of every variant (bare included), so a ratio is the median over ${HTTP_ROUNDS} independent process pairs, taken within each round; the HTTP rows took ${fmt((httpEnded - httpStarted) / 1000)} s; server LOG_LEVEL=info, CHECK_LOG_LEVEL default`,
    '',
    ...httpLines,
    '',
    '| measure | value | note |',
    '|---|---:|---|',
    ...rows.map(([what, value, note]) => `| ${what} | ${value} | ${note} |`),
    ...profileLines,
    ...editedLines,
    ...shadowLines,
    '',
  ].join('\n'),
)
process.exit(0)
