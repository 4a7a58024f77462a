/**
 * npm run bench:bulk (PostgreSQL: DATABASE_URL=postgres://…; PGlite without
 * it): apply-permission-changes and policy import at their targets.
 *
 *   - one call of 1,000 changes (target: under 1 s);
 *   - 100,000 changes in 100 calls (target: under 60 s);
 *   - an import of 1,000,000 rows (target: under 60 s).
 *
 * The commands are called as the routes and the command line call them
 * (checks, one write through the write queue, memory), without HTTP.
 * BENCH_BULK_CALLS and BENCH_IMPORT_ROWS make the runs smaller.
 */
import { applyPermissionChanges, type ChangeInput } from '../src/commands/applyPermissionChanges.js'
import { onboardMerchant } from '../src/commands/onboardMerchant.js'
import { importPolicy } from '../src/commands/importPolicy.js'
import { exportPolicy } from '../src/commands/exportPolicy.js'
import { SYSTEM_ACTOR } from '../src/domain/audit.js'
import { headerLines } from '../src/domain/policyFile.js'
import { migrate } from '../src/storage/migrate.js'
import { benchDatabase, benchService, postgresUrl } from './seed.js'

const CALLS = Number(process.env.BENCH_BULK_CALLS ?? 100)
const IMPORT_ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 1_000_000)
const PER_CALL = 1000

const rows: string[] = []
const record = (what: string, ms: number, target: number) => {
  const line = `| ${what} | ${(ms / 1000).toFixed(2)} s | under ${target} s | ${ms < target * 1000 ? 'met' : 'missed'} |`
  rows.push(line)
  process.stderr.write(`${line}\n`)
}

const store = await benchDatabase()
await migrate(store.db)
const service = await benchService(store.db)
try {
  const owner = await onboardMerchant(service, SYSTEM_ACTOR, { merchant_id: 'm1', email: 'owner@m1.bench', password: 'bench-password', name: 'Owner' })
  const caller = { account: owner, ip: null }
  const pairs = service.engine.catalogEntries().filter((e) => e.is_active && e.scope !== 'platform')
  // 1,000 distinct role grants per call: sub-roles of the call × the catalog's pairs, as many sub-roles as needed.
  const listFor = (call: number): ChangeInput[] =>
    Array.from({ length: PER_CALL }, (_, i) => {
      const pair = pairs[i % pairs.length] ?? { obj: 'orders', act: 'read' }
      return { kind: 'role_grant', sub_role: `c${call}_r${Math.floor(i / pairs.length)}`, obj: pair.obj, act: pair.act, domain: 'm1' }
    })

  let started = performance.now()
  const one = await applyPermissionChanges(service, caller, { changes: listFor(0) })
  record('one call of 1,000 changes', performance.now() - started, 1)
  if (one.changed !== PER_CALL) throw new Error(`changed ${one.changed}`)

  started = performance.now()
  for (let call = 1; call <= CALLS; call++) await applyPermissionChanges(service, caller, { changes: listFor(call) })
  record(`${(CALLS * PER_CALL).toLocaleString('en-US')} changes in ${CALLS} calls`, performance.now() - started, 60)

  // The import: sub-roles × `global` and 99 merchants × the pairs, up to IMPORT_ROWS lines.
  await store.db.query("INSERT INTO merchants (id) SELECT 'i' || g FROM generate_series(1, 99) AS g")
  const domains = ['global', ...Array.from({ length: 99 }, (_, i) => `i${i + 1}`)]
  const lines: string[] = []
  for (let r = 0; lines.length < IMPORT_ROWS; r++) {
    for (const d of domains) for (const p of pairs) if (lines.length < IMPORT_ROWS) lines.push(`p, imp_${r}, ${d}, ${p.obj}, ${p.act}, allow`)
  }
  // The file says what the whole store holds: the bulk calls' rows stay.
  const current = (await exportPolicy(service)).csv.split('\n').filter((l) => l.startsWith('p,'))
  const text = [...headerLines({ domain: null }), ...current, ...lines].join('\n')
  started = performance.now()
  const imported = await importPolicy(service, text)
  record(`import of ${IMPORT_ROWS.toLocaleString('en-US')} rows`, performance.now() - started, 60)
  if (imported.diff.added.length !== IMPORT_ROWS) throw new Error(`imported ${imported.diff.added.length}`)

  const { rows: audit } = await store.db.query<{ n: string }>('SELECT count(*)::text AS n FROM permission_audit')
  process.stdout.write(
    [
      `command: ${postgresUrl === undefined ? '' : 'DATABASE_URL=postgres://… '}npm run bench:bulk  (${postgresUrl === undefined ? 'PGlite' : 'PostgreSQL'})`,
      '',
      '| what | time | target | |',
      '|---|---:|---|---|',
      ...rows,
      '',
      `audit rows written: ${audit[0]?.n ?? '?'}`,
      '',
    ].join('\n'),
  )
} finally {
  await service.close()
  await store.drop()
}
