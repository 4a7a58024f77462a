/**
 * Cold start of the real runner on a seeded PostgreSQL schema: from spawning
 * `src/http/server.ts` to its first 200 on /readyz, and where a load's time
 * goes, measured step by step in this process on the same store.
 */
import { execFileSync, spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { newEnforcer } from 'casbin'
import { RulesAdapter } from '../src/engine/adapter.js'
import { DecisionIndex } from '../src/engine/decisionIndex.js'
import { parseModel, readModel } from '../src/engine/model.js'
import { indexRows } from '../src/engine/modelRows.js'
import { iterateRulePages } from '../src/storage/policyRows.js'
import type { Database } from '../src/storage/db.js'
import { openPostgres } from '../src/storage/pg.js'
import { BENCH_SECRET, postgresUrl } from './seed.js'

const gc = (globalThis as { gc?: () => void }).gc

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return typeof address === 'object' && address !== null ? address.port : 0
}

const repository = new URL('..', import.meta.url).pathname

/**
 * How the runner is started: `built` is what the container image runs
 * (`node dist/http/server.js`, compiled here first with `npm run build`),
 * `source` is `npm start` (TypeScript compiled as it loads, by tsx).
 */
export type RunnerForm = 'built' | 'source'

/** Compiles src/ into dist/ (`npm run build`), for the `built` form. */
export function buildRunner(): void {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: repository, stdio: ['ignore', 'ignore', 'inherit'] })
}

/** Milliseconds from spawning the runner on `schema` (with `env` added to the bench's environment) to its first 200 on /readyz. */
export async function spawnToReady(schema: string, form: RunnerForm = 'source', env: Record<string, string> = {}): Promise<number> {
  if (postgresUrl === undefined) throw new Error('cold start is measured on PostgreSQL')
  const port = await freePort()
  const url = new URL(postgresUrl)
  url.searchParams.set('options', `-c search_path=${schema}`)
  const started = performance.now()
  const entry = form === 'built' ? [`${repository}dist/http/server.js`] : ['--import', 'tsx', `${repository}src/http/server.ts`]
  const child = spawn(process.execPath, entry, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DATABASE_URL: url.toString(), JWT_SECRET: BENCH_SECRET, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', ...env },
  })
  let exited = false
  child.once('exit', () => (exited = true))
  try {
    for (;;) {
      if (exited) throw new Error('the runner exited before it was ready')
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      )
      if (ready) return performance.now() - started
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => (exited ? resolve(null) : child.once('exit', resolve)))
  }
}

export interface LoadPhases {
  /** The rows read through storage's iterator (query, transfer and pg's parse of the rows) and interned as the adapter does. */
  readMs: number
  /** Casbin's model filled from rows in memory (newEnforcer over an in-memory adapter). */
  casbinMs: number
  /** The row tables of the model (used by in-place changes). */
  rowTablesMs: number
  /** The decision index built from the model's rows. */
  indexMs: number
  rules: number
  /** Heap per rule of the Casbin model and of the index, in bytes. */
  casbinHeapPerRule: number
  indexHeapPerRule: number
}

function heap(): number {
  gc?.()
  return process.memoryUsage().heapUsed
}

/** Each step of a load on its own, over the store's `p` and `g` rows. */
export async function loadPhases(db: Database): Promise<LoadPhases> {
  const modelText = readModel(new URL('../model.conf', import.meta.url).pathname).text
  let started = performance.now()
  const p: string[][] = []
  const g: string[][] = []
  // Interned as the storage adapter does: a million rows' repeated values are a few thousand strings.
  const pool = new Map<string, string>()
  for await (const page of iterateRulePages(db)) {
    for (const { ptype, fields } of page) {
      for (let i = 0; i < fields.length; i++) {
        const value = fields[i] as string
        const known = pool.get(value)
        if (known === undefined) pool.set(value, value)
        else fields[i] = known
      }
      ;(ptype === 'g' ? g : p).push(fields)
    }
  }
  const readMs = performance.now() - started
  const rules = p.length + g.length
  let before = heap()
  started = performance.now()
  const enforcer = await newEnforcer(parseModel(modelText), new RulesAdapter({ p, g }))
  const casbinMs = performance.now() - started
  const casbinHeap = heap() - before
  started = performance.now()
  indexRows(enforcer.getModel())
  const rowTablesMs = performance.now() - started
  const model = enforcer.getModel().model
  before = heap()
  started = performance.now()
  const index = DecisionIndex.build(model.get('p')?.get('p')?.policy ?? [], model.get('g')?.get('g')?.policy ?? [])
  const indexMs = performance.now() - started
  const indexHeap = heap() - before
  // Both kept alive until measured.
  if (index === null || enforcer === null) throw new Error('unreachable')
  return { readMs, casbinMs, rowTablesMs, indexMs, rules, casbinHeapPerRule: casbinHeap / rules, indexHeapPerRule: indexHeap / rules }
}

/**
 * loadPhases in a process of its own (`--phases <schema>`): the caller's own
 * heap (a bench holding a million-rule engine already) would make every step's
 * garbage collection, and so its time, larger than a starting runner's.
 */
export function loadPhasesApart(schema: string): LoadPhases {
  const out = execFileSync(process.execPath, ['--expose-gc', '--max-old-space-size=8192', '--import', 'tsx', fileURLToPath(import.meta.url), '--phases', schema], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return JSON.parse(out) as LoadPhases
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2] === '--phases') {
  if (postgresUrl === undefined) throw new Error('load phases are measured on PostgreSQL')
  const db = openPostgres({ url: postgresUrl, schema: process.argv[3] as string })
  const phases = await loadPhases(db)
  await db.close()
  process.stdout.write(JSON.stringify(phases))
}
