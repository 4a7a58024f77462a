/**
 * npm run bench:import-phases (PostgreSQL: DATABASE_URL=postgres://…; PGlite
 * without it): where one policy import's time goes. The same file as
 * bench/bulk.ts's import row (BENCH_IMPORT_ROWS lines, default 100,000), into
 * a store holding only the onboarded merchant; each statement of the import
 * timed as the database answers it (by its first words), the time between
 * them (this process's own work), and the replica taking the write into
 * memory after the COMMIT. Run with `node --cpu-prof` to split the
 * process's share further.
 */
import { importPolicy } from '../src/commands/importPolicy.js'
import { onboardMerchant } from '../src/commands/onboardMerchant.js'
import { SYSTEM_ACTOR } from '../src/domain/audit.js'
import { parsePolicyCsv } from '../src/domain/policyCsv.js'
import { headerLines } from '../src/domain/policyFile.js'
import { readFileSync } from 'node:fs'
import type { Database, Queryable } from '../src/storage/db.js'
import { migrate } from '../src/storage/migrate.js'
import { benchDatabase, benchService, postgresUrl } from './seed.js'

const IMPORT_ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 100_000)

/** Time per kind of statement, and the process's time between statements. */
const spent = new Map<string, { ms: number; count: number }>()
const add = (what: string, ms: number) => {
  const entry = spent.get(what) ?? { ms: 0, count: 0 }
  entry.ms += ms
  entry.count++
  spent.set(what, entry)
}
let lastEnd: number | null = null

/** A statement's kind: its first words, and the first part of a WITH. */
function kindOf(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  const withPart = /^WITH (\w+) AS \( ?(\w+ \w+ \w+)/.exec(flat)
  if (withPart !== null) return `WITH ${withPart[1]} (${withPart[2]}) … ${flat.slice(-24)}`
  return flat.slice(0, 48)
}

function timed(q: Queryable): Queryable {
  const time = async <T>(text: string, run: () => Promise<T>): Promise<T> => {
    const started = performance.now()
    if (lastEnd !== null) add('(node between statements)', started - lastEnd)
    try {
      return await run()
    } finally {
      lastEnd = performance.now()
      add(kindOf(text), lastEnd - started)
    }
  }
  return {
    query: (text, params) => time(text, () => q.query(text, params)),
    queryArrays: (text, params) => time(text, () => q.queryArrays(text, params)),
    exec: (script) => time(script, () => q.exec(script)),
    ...(q.copyFrom !== undefined ? { copyFrom: (target: string, lines: Iterable<string>) => time(`COPY ${target}`, () => (q.copyFrom as NonNullable<Queryable['copyFrom']>)(target, lines)) } : {}),
  }
}

/** CPU seconds a local process has used (its /proc stat; null where that cannot be read). */
function processCpu(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return null
  }
}

const store = await benchDatabase()
await migrate(store.db)
const service = await benchService(store.db)
try {
  await onboardMerchant(service, SYSTEM_ACTOR, { merchant_id: 'm1', email: 'owner@m1.bench', password: 'bench-password', name: 'Owner' })
  const pairs = service.engine.catalogEntries().filter((e) => e.is_active && e.scope !== 'platform')
  await store.db.query("INSERT INTO merchants (id) SELECT 'i' || g FROM generate_series(1, 99) AS g")
  const domains = ['global', ...Array.from({ length: 99 }, (_, i) => `i${i + 1}`)]
  const lines: string[] = []
  for (let r = 0; lines.length < IMPORT_ROWS; r++) {
    for (const d of domains) for (const p of pairs) if (lines.length < IMPORT_ROWS) lines.push(`p, imp_${r}, ${d}, ${p.obj}, ${p.act}, allow`)
  }
  const text = [...headerLines({ domain: null }), ...lines].join('\n')

  let started = performance.now()
  parsePolicyCsv(text)
  const parseMs = performance.now() - started

  // Every statement of the import's transaction through the timer; the COMMIT is the transaction's own.
  const db = store.db as Database & { transaction: Database['transaction'] }
  const transaction = db.transaction.bind(db)
  let commitStarted = 0
  let backend = 0
  let backendCpu: number | null = null
  db.transaction = (work, options) =>
    transaction(async (tx, opened) => {
      if (postgresUrl !== undefined) {
        const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        backend = rows[0]?.pid ?? 0
        backendCpu = processCpu(backend)
      }
      const value = await work(timed(tx), opened)
      commitStarted = performance.now()
      return value
    }, options)
  const applyCommitted = service.replica.applyCommitted.bind(service.replica)
  let commitMs = 0
  let memoryMs = 0
  service.replica.applyCommitted = async (revision, changes) => {
    const at = performance.now()
    commitMs = at - commitStarted
    await applyCommitted(revision, changes)
    memoryMs = performance.now() - at
  }

  const cpu = process.cpuUsage()
  started = performance.now()
  const write = service.writes.run.bind(service.writes)
  let beforeWriteMs = 0
  service.writes.run = (work, options) => {
    beforeWriteMs = performance.now() - started
    return write(work, options)
  }
  const imported = await importPolicy(service, text)
  const totalMs = performance.now() - started
  const used = process.cpuUsage(cpu)
  const backendAfter = backend === 0 ? null : processCpu(backend)
  if (imported.diff.added.length !== IMPORT_ROWS) throw new Error(`imported ${imported.diff.added.length}`)

  const ms = (n: number) => `${(n / 1000).toFixed(2)} s`
  const table = [...spent.entries()].sort((a, b) => b[1].ms - a[1].ms).map(([what, { ms: t, count }]) => `| ${what} | ${count} | ${ms(t)} |`)
  process.stdout.write(
    [
      `command: ${postgresUrl === undefined ? '' : 'DATABASE_URL=postgres://… '}BENCH_IMPORT_ROWS=${IMPORT_ROWS} npm run bench:import-phases  (${postgresUrl === undefined ? 'PGlite' : 'PostgreSQL'})`,
      '',
      `import of ${IMPORT_ROWS.toLocaleString('en-US')} rows: ${ms(totalMs)} (this process's CPU ${ms((used.user + used.system) / 1000)})`,
      `the database's backend CPU: ${backendCpu === null || backendAfter === null ? 'not readable' : `${(backendAfter - backendCpu).toFixed(2)} s`}`,
      `parse alone (once more, outside the import): ${ms(parseMs)}`,
      `before the write (parse, scope): ${ms(beforeWriteMs)}`,
      `COMMIT: ${ms(commitMs)}; memory after it (replica): ${ms(memoryMs)}`,
      '',
      '| inside the transaction | statements | time |',
      '|---|---:|---:|',
      ...table,
      '',
    ].join('\n'),
  )
} finally {
  await service.close()
  await store.drop()
}
