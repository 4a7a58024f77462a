/**
 * npm run bench:audit (needs DATABASE_URL=postgres://…): a filtered page of
 * the audit list over a million rows, timed, with its query plan.
 */
import { listAudit } from '../src/storage/audit.js'
import { migrate } from '../src/storage/migrate.js'
import { benchDatabase, postgresUrl } from './seed.js'

if (postgresUrl === undefined) {
  process.stderr.write('set DATABASE_URL=postgres://… : this measures PostgreSQL\n')
  process.exit(2)
}
const ROWS = Number(process.env.BENCH_AUDIT_ROWS ?? 1_000_000)
const store = await benchDatabase()
const { db } = store
await migrate(db)
const seedStart = performance.now()
// Rows are written directly (the chain is not the subject here): 2,000 users and 200 roles over 100 merchants.
await db.query(
  `INSERT INTO permission_audit (action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash)
   SELECT (ARRAY['grant','revoke','deny','register'])[1 + i % 4],
          CASE WHEN i % 3 = 0 THEN 'role' ELSE 'user' END,
          CASE WHEN i % 3 = 0 THEN 'role_' || (i % 200) ELSE 'user-' || (i % 2000) END,
          'orders', 'read', 'm' || (i % 100), 'm' || (i % 100), 'actor', 'merchant', '127.0.0.1',
          now() - (i || ' seconds')::interval, '', ''
   FROM generate_series(1, $1::int) AS i`,
  [ROWS],
)
await db.query('ANALYZE permission_audit')
process.stderr.write(`seeded ${ROWS} rows in ${Math.round(performance.now() - seedStart)} ms\n`)

const cases: Array<[string, Parameters<typeof listAudit>[1]]> = [
  ['target_type=user&target_id=user-42', { target_type: 'user', target_id: 'user-42' }],
  ['target_id=role_8&action=grant', { target_id: 'role_8', action: 'grant' }],
  ['merchant m6 (merchant caller), action=deny', { merchant_id: 'm6', action: 'deny' }],
  ['no filter', {}],
]
const lines = [`command: DATABASE_URL=postgres://… npm run bench:audit`, `rows: ${ROWS}`, '', '| filter | page 1 (20 rows), ms | total |', '|---|---:|---:|']
for (const [name, filter] of cases) {
  await listAudit(db, filter, 1, 20)
  const runs: number[] = []
  let total = 0
  for (let i = 0; i < 5; i++) {
    const started = performance.now()
    total = (await listAudit(db, filter, 1, 20)).total
    runs.push(performance.now() - started)
  }
  runs.sort((a, b) => a - b)
  lines.push(`| ${name} | ${(runs[2] as number).toFixed(1)} | ${total} |`)
}
const plan = await db.query<{ 'QUERY PLAN': string }>(
  `EXPLAIN ANALYZE SELECT id, action, target_type, target_id FROM permission_audit
   WHERE target_type = 'user' AND target_id = 'user-42' ORDER BY permission_audit.id DESC LIMIT 20 OFFSET 0`,
)
lines.push('', 'EXPLAIN ANALYZE (target_type=user&target_id=user-42, page 1):', ...plan.rows.map((r) => `    ${r['QUERY PLAN']}`))
process.stdout.write(`${lines.join('\n')}\n`)
await store.drop()
