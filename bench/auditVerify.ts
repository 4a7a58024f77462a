/**
 * npm run bench:audit-verify: the longest event-loop stall while the audit
 * chain is verified, at a million rows (BENCH_AUDIT_ROWS), from the first row
 * (what `audit verify` does) and from the checkpoint after a thousand more
 * rows (what the console's visit does). PGlite by default, PostgreSQL with
 * DATABASE_URL=postgres://…; measure on an idle machine: a busy one stalls
 * every process, whatever it runs.
 */
import { verifyAudit, type AuditVerification } from '../src/commands/verifyAudit.js'
import { migrate } from '../src/storage/migrate.js'
import { appendChainedAuditRows, measureStall } from './auditChain.js'
import { benchDatabase, postgresUrl } from './seed.js'

const ROWS = Number(process.env.BENCH_AUDIT_ROWS ?? 1_000_000)
/** Rows per seeding statement: the recursive query keeps them all until it inserts. */
const SEED_BATCH = 100_000

const store = await benchDatabase()
const { db } = store
await migrate(db)
const seedStart = performance.now()
for (let done = 0; done < ROWS; done += SEED_BATCH) await appendChainedAuditRows(db, Math.min(SEED_BATCH, ROWS - done))
process.stderr.write(`seeded ${ROWS} chained rows in ${Math.round(performance.now() - seedStart)} ms\n`)

const lines = [
  `command: ${postgresUrl === undefined ? '' : 'DATABASE_URL=postgres://… '}npm run bench:audit-verify`,
  `rows: ${ROWS} (${postgresUrl === undefined ? 'PGlite' : 'PostgreSQL'})`,
  '',
  '| verification | rows read | largest page | longest stall, ms | took, s |',
  '|---|---:|---:|---:|---:|',
]
const row = (name: string, { result, stall, took }: { result: AuditVerification; stall: number; took: number }) => {
  if (result.problem !== null) throw new Error(`the chain does not verify: ${JSON.stringify(result.problem)}`)
  lines.push(`| ${name} | ${result.read} | ${result.largestSlice} | ${stall.toFixed(1)} | ${(took / 1000).toFixed(1)} |`)
}
row('full (audit verify)', await measureStall(() => verifyAudit(db, { full: true })))
await appendChainedAuditRows(db, 1000)
row('from the checkpoint, 1,000 new rows', await measureStall(() => verifyAudit(db, { full: false })))
process.stdout.write(`${lines.join('\n')}\n`)
await store.drop()
