import t from 'tap'
import { buildService } from '../../src/compose.js'
import { declaredCatalog } from '../../src/domain/permissions.js'
import type { Database } from '../../src/storage/db.js'
import { migrate, readMigrations, type Migration } from '../../src/storage/migrate.js'
import { backend, freshDatabase, secondConnection, testConfig } from '../helper.js'

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
