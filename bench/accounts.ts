/**
 * npm run bench:accounts (needs DATABASE_URL=postgres://…): a filtered page
 * of the account list over 100,000 accounts, timed, with its query plans.
 */
import { listAccounts } from '../src/storage/accounts.js'
import { migrate } from '../src/storage/migrate.js'
import { benchDatabase, postgresUrl } from './seed.js'

if (postgresUrl === undefined) {
  process.stderr.write('set DATABASE_URL=postgres://… : this measures PostgreSQL\n')
  process.exit(2)
}
const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 100_000)
const store = await benchDatabase()
const { db } = store
await migrate(db)
const seedStart = performance.now()
// Accounts are written directly (hashes are not the subject here): 100 merchants, 20 sub-roles, one in 50 deactivated.
await db.query("INSERT INTO merchants (id) SELECT 'm' || i FROM generate_series(0, 99) AS i")
await db.query("INSERT INTO sub_roles (code) SELECT 'role_' || i FROM generate_series(0, 19) AS i")
await db.query(
  `INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code, parent_role, status, created_at)
   SELECT gen_random_uuid(), 'user' || i || '@m' || (i % 100) || '.example', 'x', 'User ' || i, 'merchant', 'm' || (i % 100),
          'role_' || (i % 20), 'system_owner', CASE WHEN i % 50 = 0 THEN 'deactivated' ELSE 'active' END,
          now() - (i || ' seconds')::interval
   FROM generate_series(1, $1::int) AS i`,
  [ACCOUNTS],
)
await db.query('ANALYZE admin_accounts')
process.stderr.write(`seeded ${ACCOUNTS} accounts in ${Math.round(performance.now() - seedStart)} ms\n`)

const cases: Array<[string, Parameters<typeof listAccounts>[1]]> = [
  ['no filter', {}],
  ['merchant_id=m42 (or a merchant caller)', { merchant_id: 'm42' }],
  ['merchant_id=m42&sub_role_code=role_2', { merchant_id: 'm42', sub_role_code: 'role_2' }],
  ['status=deactivated', { status: 'deactivated' }],
  ['q=user4242', { q: 'user4242' }],
  ['merchant_id=m42&q=user1', { merchant_id: 'm42', q: 'user1' }],
]
const lines = [`command: DATABASE_URL=postgres://… npm run bench:accounts`, `accounts: ${ACCOUNTS}`, '', '| filter | page 1 (20 rows) + total, ms | total |', '|---|---:|---:|']
for (const [name, filter] of cases) {
  await listAccounts(db, filter, 1, 20)
  const runs: number[] = []
  let total = 0
  for (let i = 0; i < 5; i++) {
    const started = performance.now()
    total = (await listAccounts(db, filter, 1, 20)).total
    runs.push(performance.now() - started)
  }
  runs.sort((a, b) => a - b)
  lines.push(`| ${name} | ${(runs[2] as number).toFixed(1)} | ${total} |`)
}
const plan = await db.query<{ 'QUERY PLAN': string }>(
  `EXPLAIN ANALYZE SELECT id FROM admin_accounts WHERE merchant_id = 'm42' AND sub_role_code = 'role_2' ORDER BY created_at DESC, id DESC LIMIT 20`,
)
lines.push('', 'EXPLAIN ANALYZE (merchant_id=m42&sub_role_code=role_2, page 1):', ...plan.rows.map((r) => `    ${r['QUERY PLAN']}`))
process.stdout.write(`${lines.join('\n')}\n`)
await store.drop()
