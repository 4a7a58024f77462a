/**
 * The service's database role: the GRANT statements of docs/operations.md are enough to
 * run it (start, log in, fail a login), and a role lacking one privilege is
 * refused at start-up with a message naming it and an exit code of its own.
 */
import t, { type Test } from 'tap'
import { EXIT_MISSING_PRIVILEGES } from '../../src/http/server.js'
import { migrate } from '../../src/storage/migrate.js'
import { openPostgres } from '../../src/storage/pg.js'
import { TABLE_PRIVILEGES, missingPrivileges } from '../../src/storage/privileges.js'
import { backend, freshDatabase, postgresUrl } from '../helper.js'
import { startServer, type ServerProcess } from '../support/serverProcess.js'
import { readmeServiceRole, readmeServiceRoleStatements } from '../support/serviceRole.js'

const SECRET = 'privileges-test-secret-long-enough-0123456789'
const EMAIL = 'root@example.com'
const PASSWORD = 'root-password-123'
const EXIT_WAIT_MS = 60_000

t.test('the list of tables is the migrated schema', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  // A partition is part of its table (its privileges are the table's), so only tables that are not partitions count.
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
  )
  t.same(
    rows.map((r) => r.name),
    Object.keys(TABLE_PRIVILEGES).sort(),
    'every table the migrations create is in TABLE_PRIVILEGES, and nothing else',
  )
})

t.test('docs/operations.md grants every privilege in the list', async (t) => {
  // Read as text, so that this part runs on PGlite too.
  const statements = readmeServiceRoleStatements('s', 'r', 'p')
  for (const [table, privileges] of Object.entries(TABLE_PRIVILEGES)) {
    for (const privilege of privileges) {
      const granted = statements.some((s) => {
        const grant = /^GRANT (.+) ON (.+) TO r$/.exec(s)
        if (grant === null) return false
        const [, what, on] = grant as unknown as [string, string, string]
        return what.split(/,\s*/).includes(privilege) && on.split(/,\s*/).includes(table)
      })
      t.ok(granted, `${privilege} ON ${table}`)
    }
  }
})

async function login(server: ServerProcess, password: string): Promise<{ status: number; code: unknown }> {
  const res = await fetch(`${server.base}/v2/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'login', data: { email: EMAIL, password } }),
    signal: AbortSignal.timeout(30_000),
  })
  const body = (await res.json()) as { response_code?: unknown }
  return { status: res.status, code: body.response_code }
}

/**
 * A fresh schema migrated by its owner and a role made with the statements
 * of docs/operations.md, as that page says to run the service; null on PGlite, which
 * has one superuser and no grants to check.
 */
async function schemaWithServiceRole(t: Test) {
  if (backend !== 'postgres' || postgresUrl === undefined) {
    t.equal(backend, 'pglite')
    return null
  }
  const db = await freshDatabase(t)
  const schema = db.schema as string
  await migrate(db)
  const service = await readmeServiceRole(t, db, schema, postgresUrl)
  const env = { DATABASE_URL: service.url(postgresUrl), JWT_SECRET: SECRET, BOOTSTRAP_ADMIN_EMAIL: EMAIL, BOOTSTRAP_ADMIN_PASSWORD: PASSWORD }
  return { db, schema, service, env, url: service.url(postgresUrl) }
}

t.test('PostgreSQL: the service runs as a role with exactly the documented grants', async (t) => {
  const setup = await schemaWithServiceRole(t)
  if (setup === null) return
  const server = await startServer(t, { env: setup.env })
  const ready = await fetch(`${server.base}/readyz`, { signal: AbortSignal.timeout(30_000) })
  t.equal(ready.status, 200, 'ready')
  t.same(await login(server, PASSWORD), { status: 200, code: '001' }, 'a login works')
  t.same(await login(server, 'wrong-password'), { status: 401, code: '203' }, 'a failed login is counted and refused, not a 500')
  t.same(await login(server, PASSWORD), { status: 200, code: '001' }, 'and the next one works')
  const stopped = await server.stop()
  t.equal(stopped.code, 0, 'stops cleanly')
})

t.test('PostgreSQL: a role lacking a privilege is refused at start-up, naming it', async (t) => {
  const setup = await schemaWithServiceRole(t)
  if (setup === null) return
  const { db, schema, service } = setup
  const asService = openPostgres({ url: setup.url, max: 1 })
  t.teardown(() => asService.close())
  t.same(await missingPrivileges(asService), { role: service.role, schema, missing: [] }, "the documented grants lack nothing")

  await db.query(`REVOKE USAGE ON SEQUENCE casbin_rule_id_seq FROM ${service.role}`)
  await db.query(`REVOKE DELETE ON permission_overrides FROM ${service.role}`)
  t.same(
    (await missingPrivileges(asService)).missing,
    ['DELETE ON permission_overrides', 'USAGE ON SEQUENCE casbin_rule_id_seq'],
    'tables and the sequences of their serial columns',
  )
  await db.query(`GRANT USAGE ON SEQUENCE casbin_rule_id_seq TO ${service.role}`)
  await db.query(`GRANT DELETE ON permission_overrides TO ${service.role}`)
  await db.query(`REVOKE USAGE ON SCHEMA ${schema} FROM ${service.role}`)
  const fresh = openPostgres({ url: setup.url, max: 1 })
  t.teardown(() => fresh.close())
  t.same((await missingPrivileges(fresh)).missing, [`USAGE ON SCHEMA ${schema}`], 'the schema itself')
  await db.query(`GRANT USAGE ON SCHEMA ${schema} TO ${service.role}`)

  await db.query(`REVOKE DELETE ON login_failures FROM ${service.role}`)
  const server = await startServer(t, { env: setup.env, waitUntilHealthy: false })
  let timer: NodeJS.Timeout | undefined
  const exit = await Promise.race([
    server.exited,
    new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), EXIT_WAIT_MS)
    }),
  ])
  clearTimeout(timer)
  t.ok(exit !== null, `exits within ${EXIT_WAIT_MS} ms`)
  t.equal(exit?.code, EXIT_MISSING_PRIVILEGES, 'with the exit code for missing privileges')
  t.match(server.stderr(), `lacks privileges the service needs in schema "${schema}": DELETE ON login_failures`, 'stderr names it')
  t.match(server.stderr(), `"${service.role}"`, 'and the role')
})
