import t from 'tap'
import { buildService } from '../../src/compose.js'
import { declaredCatalog } from '../../src/domain/permissions.js'
import type { Database } from '../../src/storage/db.js'
import { migrate, readMigrations, type Migration } from '../../src/storage/migrate.js'
import { listDomainSubRoles, subRoleKnownIn } from '../../src/storage/subRoles.js'
import { backend, freshDatabase, secondConnection, testConfig } from '../helper.js'
import { pgliteRunOnly } from '../support/onceOnPGlite.js'

const all = readMigrations().map((m) => m.version)
const TABLES = [
  'schema_migrations',
  'merchants',
  'sub_roles',
  'admin_accounts',
  'casbin_rule',
  'permission_overrides',
  'permission_catalog',
  'permission_audit',
  'store_revision',
]

async function recorded(db: Database): Promise<Array<{ version: string; n: number }>> {
  const { rows } = await db.query<{ version: string; n: number }>(
    'SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version',
  )
  return rows
}

async function missingTables(db: Database): Promise<string[]> {
  const { rows } = await db.query<{ name: string; present: boolean }>(
    'SELECT name, to_regclass(name) IS NOT NULL AS present FROM unnest($1::text[]) AS name',
    [TABLES],
  )
  return rows.filter((r) => !r.present).map((r) => r.name)
}

t.test('the migrations in sql/ are numbered and in order', async (t) => {
  t.ok(all.length >= 3)
  t.same([...all].sort(), all)
  t.equal(new Set(all.map((v) => v.slice(0, 3))).size, all.length, 'no two share a number')
})

t.test('migrations apply once; a second run applies nothing', async (t) => {
  const db = await freshDatabase(t)
  t.same(await migrate(db), all, 'the first run applies every file, in order')
  t.same(await migrate(db), [], 'a second run applies nothing')
  t.same(await recorded(db), all.map((version) => ({ version, n: 1 })))
  t.same(await missingTables(db), [])
  const { rows } = await db.query<{ code: string; is_root: boolean }>('SELECT code, is_root FROM sub_roles')
  t.same(rows, [{ code: 'super_admin', is_root: true }], 'seed rows inserted once')
})

t.test(
  "the tests' services start from a store the migrations in sql/ were applied to, whole",
  { skip: pgliteRunOnly('a dump of an embedded store, test/support/pgliteTemplate.ts') },
  async (t) => {
    const db = await freshDatabase(t, { migrated: true })
    t.same(await recorded(db), all.map((version) => ({ version, n: 1 })), 'every migration recorded once')
    t.same(await migrate(db), [], 'so the service applies none')
    t.same(await missingTables(db), [])
    const today = `decision_events_p${new Date().toISOString().slice(0, 10).replaceAll('-', '')}`
    t.same((await db.query('SELECT to_regclass($1) IS NOT NULL AS made', [today])).rows, [{ made: true }], "with today's decision log partition")
    const empty = await freshDatabase(t)
    t.same(await migrate(empty), all, 'a store asked for without `migrated` is still empty')
    const databases = (await empty.query<{ datname: string }>('SELECT datname FROM pg_database ORDER BY datname')).rows.map((r) => r.datname)
    t.same(databases, ['postgres'], 'and holds no template database to unpack')
  },
)

t.test('a new migration file is applied on its own', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const extra: Migration = { version: '999_extra', sql: 'CREATE TABLE extra_table (id int PRIMARY KEY);' }
  t.same(await migrate(db, [...readMigrations(), extra]), ['999_extra'])
  t.same(await migrate(db, [...readMigrations(), extra]), [])
  t.same((await db.query("SELECT to_regclass('extra_table') IS NOT NULL AS present")).rows, [{ present: true }])
})

t.test('a failing migration leaves nothing behind', async (t) => {
  const db = await freshDatabase(t)
  const migrations: Migration[] = [
    { version: '001_good', sql: 'CREATE TABLE good_table (id int PRIMARY KEY);' },
    { version: '002_bad', sql: 'CREATE TABLE bad_table (id int PRIMARY KEY); SELECT no_such_function();' },
  ]
  await t.rejects(migrate(db, migrations), { code: '42883' })
  const { rows } = await db.query<Record<string, boolean>>(
    "SELECT to_regclass('good_table') IS NOT NULL AS good, to_regclass('bad_table') IS NOT NULL AS bad, to_regclass('schema_migrations') IS NOT NULL AS recorded",
  )
  t.same(rows, [{ good: false, bad: false, recorded: false }], 'all files run in one transaction')
  t.same(await migrate(db, migrations.slice(0, 1)), ['001_good'], 'and the store is usable afterwards')
})

t.test('concurrent start-up migrations', async (t) => {
  const db = await freshDatabase(t)
  if (backend === 'postgres') {
    // Separate pools play separate processes: each migrate() runs on its own connection.
    const others = [secondConnection(t, db), secondConnection(t, db), secondConnection(t, db)]
    const results = await Promise.all([db, ...others].map((d) => migrate(d)))
    t.same(results.flat().sort(), all, 'each migration applied by exactly one of them')
    t.equal(results.filter((r) => r.length === all.length).length, 1, 'one instance applied them all, the others waited on the lock')
  } else {
    // PGlite has one connection: concurrent calls on it must still both succeed.
    const results = await Promise.all([migrate(db), migrate(db), migrate(db)])
    t.same(results.flat().sort(), all, 'each migration applied once')
  }
  t.same(await recorded(db), all.map((version) => ({ version, n: 1 })), 'each recorded once')
  t.same(await missingTables(db), [], 'every table exists')
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM sub_roles')
  t.equal(rows[0]?.n, 1, 'seed rows inserted once')
})

t.test('replicas starting together migrate, sync the catalog and bootstrap once', async (t) => {
  const db = await freshDatabase(t)
  // On PostgreSQL separate pools play separate replicas; PGlite has one connection, so the starts share it.
  const others = backend === 'postgres' ? [secondConnection(t, db), secondConnection(t, db)] : [db, db]
  const config = testConfig()
  const services = await Promise.all([db, ...others].map((d) => buildService(config, { db: d, skipFirstAdmin: true })))
  t.teardown(() => Promise.all(services.map((s) => s.close())))
  t.equal(services.length, 3, 'every start succeeded')
  t.ok(services.every((s) => s.engine.isActive('admin', 'register')), 'every replica sees the catalog')

  t.same(await recorded(db), all.map((version) => ({ version, n: 1 })), 'each migration recorded once')
  const { rows: events } = await db.query<{ target_id: string; n: number }>(
    "SELECT target_id, count(*)::int AS n FROM permission_audit WHERE action = 'catalog_added' GROUP BY target_id ORDER BY target_id",
  )
  t.same(
    events.map((e) => e.target_id),
    declaredCatalog().map((p) => `${p.obj}:${p.act}`).sort(),
    'one catalog_added per declared pair',
  )
  t.ok(events.every((e) => e.n === 1), 'each recorded exactly once')
  const { rows: catalog } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_catalog')
  t.equal(catalog[0]?.n, declaredCatalog().length)

  const { rows: admins } = await db.query<{ id: string }>(
    "SELECT id::text AS id FROM admin_accounts WHERE merchant_id IS NULL AND sub_role_code = 'super_admin'",
  )
  t.equal(admins.length, 1, 'exactly one system super_admin')
  const { rows: assignments } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM casbin_rule WHERE ptype = 'g'")
  t.equal(assignments[0]?.n, 1, 'and one role assignment')
  const { rows: registered } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM permission_audit WHERE action = 'register'")
  t.equal(registered[0]?.n, 1, 'audited once')

  for (const service of services) {
    const account = await service.accounts.get(admins[0]?.id ?? '')
    t.equal(account?.sub_role_code, 'super_admin', 'every replica knows the admin, whichever created it')
  }
})

t.test('sub-roles move to a domain: one merchant keeps its own, anything else becomes a global template', async (t) => {
  const db = await freshDatabase(t)
  const before = readMigrations().filter((m) => m.version < '010')
  await migrate(db, before)
  // A store as it was when codes were one namespace: labels, creators, holders and rules.
  await db.exec(`
    INSERT INTO merchants (id) VALUES ('m1'), ('m2');
    INSERT INTO sub_roles (code, label, created_domain) VALUES
      ('m2secret', 'Secret', 'm2'), ('shared', 'Made by m2', 'm2'), ('template', 'Template', 'global'),
      ('clerk', NULL, NULL), ('picker', NULL, NULL), ('gonly', NULL, NULL), ('auditor', NULL, NULL),
      ('staff', NULL, NULL), ('mixed', NULL, NULL), ('unused', NULL, NULL);
    INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code) VALUES
      ('00000000-0000-4000-8000-000000000001', 'root@m1.example', 'x', 'R', 'merchant', 'm1', 'super_admin'),
      ('00000000-0000-4000-8000-000000000002', 'secret@m2.example', 'x', 'S', 'merchant', 'm2', 'm2secret'),
      ('00000000-0000-4000-8000-000000000003', 'shared@m1.example', 'x', 'S', 'merchant', 'm1', 'shared'),
      ('00000000-0000-4000-8000-000000000004', 'clerk@m1.example', 'x', 'C', 'merchant', 'm1', 'clerk'),
      ('00000000-0000-4000-8000-000000000005', 'clerk@m2.example', 'x', 'C', 'merchant', 'm2', 'clerk'),
      ('00000000-0000-4000-8000-000000000006', 'staff@example.com', 'x', 'S', 'system_owner', NULL, 'staff'),
      ('00000000-0000-4000-8000-000000000007', 'mixed@m1.example', 'x', 'M', 'merchant', 'm1', 'mixed');
    INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4) VALUES
      ('p', 'picker', 'm1', 'orders', 'read', 'allow'),
      ('p', 'auditor', 'global', 'reports', 'read', 'allow'),
      ('p', 'mixed', 'global', 'orders', 'read', 'allow'),
      ('g', '00000000-0000-4000-8000-000000000009', 'gonly', 'm2', '', '');
  `)
  t.same(await migrate(db), all.filter((v) => v >= '010'))

  const { rows } = await db.query<{ domain: string; code: string; label: string | null; is_root: boolean }>(
    'SELECT domain, code, label, is_root FROM sub_roles ORDER BY code, domain',
  )
  t.same(
    rows,
    [
      { domain: 'global', code: 'auditor', label: null, is_root: false },
      { domain: 'global', code: 'clerk', label: null, is_root: false },
      { domain: 'm2', code: 'gonly', label: null, is_root: false },
      { domain: 'm2', code: 'm2secret', label: 'Secret', is_root: false },
      { domain: 'global', code: 'mixed', label: null, is_root: false },
      { domain: 'm1', code: 'picker', label: null, is_root: false },
      { domain: 'global', code: 'shared', label: null, is_root: false },
      { domain: 'm2', code: 'shared', label: 'Made by m2', is_root: false },
      { domain: 'global', code: 'staff', label: null, is_root: false },
      { domain: 'global', code: 'super_admin', label: null, is_root: true },
      { domain: 'global', code: 'template', label: 'Template', is_root: false },
      { domain: 'global', code: 'unused', label: null, is_root: false },
    ],
    'one merchant alone keeps its code (label included); shared, global and unused codes are templates; root stays global; a label stays with its merchant',
  )

  const { rows: uses } = await db.query<{ domain: string; code: string }>(
    `SELECT coalesce(merchant_id, 'global') AS domain, sub_role_code AS code FROM admin_accounts
     UNION SELECT v1, v0 FROM casbin_rule WHERE ptype = 'p' UNION SELECT v2, v1 FROM casbin_rule WHERE ptype = 'g'`,
  )
  for (const use of uses) t.ok(await subRoleKnownIn(db, use.domain, use.code), `${use.code} still known where it is used (${use.domain})`)
  t.notOk(await subRoleKnownIn(db, 'm1', 'm2secret'), "m1 does not know m2's sub-role")
  const labels = async (domain: string) => Object.fromEntries((await listDomainSubRoles(db, domain, 1, 100)).items.map((i) => [i.code, i.label]))
  const m1 = await labels('m1')
  t.notOk('m2secret' in m1 || 'gonly' in m1, "m2's own sub-roles are not listed in m1")
  t.equal(m1.shared, null, "m1 sees the shared template without m2's label")
  t.equal((await labels('m2')).shared, 'Made by m2', 'm2 keeps its label')
  await t.rejects(db.query("INSERT INTO sub_roles (domain, code, is_root) VALUES ('m1', 'boss', true)"), { code: '23514' }, 'only global sub-roles may be root')
  const account = (id: string, merchant: string, code: string) =>
    db.query("INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code) VALUES ($1, $2, 'x', 'N', 'merchant', $3, $4)", [
      id,
      `${id}@example.com`,
      merchant,
      code,
    ])
  await t.rejects(account('00000000-0000-4000-8000-000000000010', 'm1', 'm2secret'), { code: '23503' }, "an account cannot hold another merchant's sub-role")
  await account('00000000-0000-4000-8000-000000000011', 'm1', 'clerk')
  await account('00000000-0000-4000-8000-000000000012', 'm1', 'picker')
  await t.rejects(
    db.query("UPDATE admin_accounts SET sub_role_code = 'gonly' WHERE id = '00000000-0000-4000-8000-000000000012'"),
    { code: '23503' },
    'nor be moved to one',
  )
})
