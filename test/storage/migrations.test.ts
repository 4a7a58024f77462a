import t from 'tap'
import { buildService } from '../../src/compose.js'
import { declaredCatalog } from '../../src/domain/permissions.js'
import { migrate, readMigrations } from '../../src/storage/migrate.js'
import { backend, freshDatabase, secondConnection, testConfig } from '../helper.js'

t.test('migrations apply once', async (t) => {
  const db = await freshDatabase(t)
  const all = readMigrations().map((m) => m.version)
  t.same(await migrate(db), all)
  t.same(await migrate(db), [], 'a second run applies nothing')
  const { rows } = await db.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version')
  t.same(rows.map((r) => r.version), all)
})

t.test('instances starting together migrate, sync the catalog and bootstrap once', async (t) => {
  const db = await freshDatabase(t)
  // On PostgreSQL two pools play two replicas; PGlite has one connection, so two starts share it.
  const other = backend === 'postgres' ? secondConnection(t, db) : db
  const config = testConfig()
  const [a, b] = await Promise.all([
    buildService(config, { db, skipFirstAdmin: true }),
    buildService(config, { db: other, skipFirstAdmin: true }),
  ])
  t.ok(a.engine.isActive('admin', 'register') && b.engine.isActive('admin', 'register'))
  const { rows: versions } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations')
  t.equal(versions[0]?.n, readMigrations().length, 'each migration recorded once')
  const { rows: events } = await db.query<{ target_id: string; n: number }>(
    "SELECT target_id, count(*)::int AS n FROM permission_audit WHERE action = 'catalog_added' GROUP BY target_id",
  )
  t.equal(events.length, declaredCatalog().length, 'one catalog_added per declared pair')
  t.ok(events.every((e) => e.n === 1), 'each recorded exactly once')
  const { rows: admins } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM admin_accounts WHERE merchant_id IS NULL AND sub_role_code = 'super_admin'")
  t.equal(admins[0]?.n, 1, 'one bootstrap admin')
})

t.test('the database interface', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await db.query('CREATE TABLE scratch (id int PRIMARY KEY, note text)')
  await db.transaction(async (tx) => {
    await tx.query('INSERT INTO scratch VALUES (1, $1)', ['kept'])
  })
  await t.rejects(
    db.transaction(async (tx) => {
      await tx.query('INSERT INTO scratch VALUES (2, $1)', ['rolled back'])
      throw new Error('boom')
    }),
    /boom/,
  )
  const { rows, rowCount } = await db.query<{ id: number }>('SELECT id FROM scratch ORDER BY id')
  t.same(rows, [{ id: 1 }])
  t.equal(rowCount, 1)
  const { sqlState, violatedConstraint } = await import('../../src/storage/db.js')
  try {
    await db.query('INSERT INTO scratch VALUES (1, $1)', ['again'])
    t.fail('a duplicate key must fail')
  } catch (error) {
    t.equal(sqlState(error), '23505')
    t.equal(violatedConstraint(error), 'scratch_pkey', 'the constraint is named on both back ends')
  }
})
