/**
 * Database faults are everyday events: they cost a 503,
 * never a crash, a hung request or a write committed after its caller got an
 * error. PostgreSQL only, each case acting on its own connections: a TCP proxy
 * of the test's own in front of the server, or pg_terminate_backend of a
 * backend this test opened.
 */
import t, { type Test } from 'tap'
import { StorageUnavailableError, type Database } from '../../src/storage/db.js'
import { migrate } from '../../src/storage/migrate.js'
import { openPostgres } from '../../src/storage/pg.js'
import { backend, buildTestApp, freshDatabase, onboard, postgresUrl, register } from '../helper.js'
import { startTcpProxy, type TcpProxy } from '../support/tcpProxy.js'

const skip = backend === 'postgres' ? false : 'database faults are shown on PostgreSQL (DATABASE_URL=postgres://…)'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const LIMITS = { connectTimeoutMs: 500, statementTimeoutMs: 500 }

async function proxied(t: Test, schema: string): Promise<{ proxy: TcpProxy; db: Database; url: string }> {
  const target = new URL(postgresUrl as string)
  const proxy = await startTcpProxy({ targetPort: Number(target.port || 5432) })
  t.teardown(() => proxy.close())
  const url = proxy.url(postgresUrl as string)
  const db = openPostgres({ url, schema, ...LIMITS })
  t.teardown(() => db.close())
  return { proxy, db, url }
}


/** What `pending` rejected with (null when it resolved). */
const failure = (pending: Promise<unknown>): Promise<unknown> =>
  pending.then(
    () => null,
    (e: unknown) => e,
  )

/** The message of the error a StorageUnavailableError wraps. */
const causeOf = (error: unknown): string => {
  const cause = error instanceof Error ? error.cause : undefined
  return cause instanceof Error ? cause.message : String(cause)
}

async function merchantStored(db: Database, id: string): Promise<boolean> {
  return (await db.query('SELECT 1 FROM merchants WHERE id = $1', [id])).rows.length > 0
}

t.test('a database that refuses connections: StorageUnavailableError at once, then recovery', { skip }, async (t) => {
  const direct = await freshDatabase(t)
  await migrate(direct)
  const { proxy, db } = await proxied(t, direct.schema as string)
  await db.query('SELECT 1')
  proxy.cut()
  const plain = await failure(db.query('SELECT 1'))
  t.type(plain, StorageUnavailableError, 'a plain query')
  const write = await failure(db.transaction(async (tx) => tx.query("INSERT INTO merchants (id) VALUES ('cut-1')")))
  t.type(write, StorageUnavailableError, 'a transaction')
  // "At once": each fails on the refused connection itself, not on a timeout waited out.
  for (const [name, error] of [['the query', plain], ['the transaction', write]] as const) {
    t.notMatch(causeOf(error), /timeout/i, `${name} fails on the connection, not a timeout: ${causeOf(error)}`)
  }
  proxy.restore()
  t.equal((await db.query<{ n: number }>('SELECT 1 AS n')).rows[0]?.n, 1, 'the next query gets a fresh connection')
  t.equal(await merchantStored(direct, 'cut-1'), false, 'the failed write left nothing')
})

t.test('a silent partition: bounded waits, and the write is never committed later', { skip }, async (t) => {
  const direct = await freshDatabase(t)
  await migrate(direct)
  const { proxy, db } = await proxied(t, direct.schema as string)
  await db.query('SELECT 1')

  const error = await failure(
    db.transaction(async (tx) => {
      await tx.query("INSERT INTO merchants (id) VALUES ('partition-1')")
      // The partition starts between the write's statement and its COMMIT.
      proxy.blackhole()
    }),
  )
  // Bounded: nothing answers through the blackhole, so only the client's own timeout can end the wait.
  t.type(error, StorageUnavailableError, 'the write fails as unavailable')
  t.match(causeOf(error), /timeout/i, `ended by the statement timeout: ${causeOf(error)}`)
  t.type((error as StorageUnavailableError).inDoubtUntil, 'number', 'a COMMIT without an answer is reported in doubt, with the time after which it cannot commit')

  const pending = db.query('SELECT 1')
  await t.rejects(pending, StorageUnavailableError, 'a query during the partition fails too')
  await t.rejects(db.query('SELECT 1'), StorageUnavailableError, 'as does a new connection (connect timeout)')

  proxy.restore()
  await sleep(300)
  t.equal(await merchantStored(direct, 'partition-1'), false, 'the write was not committed after its caller got the error')
  t.equal((await db.query<{ n: number }>('SELECT 1 AS n')).rows[0]?.n, 1, 'recovery')
})

t.test('the commit guard refuses a COMMIT that arrives after the budget', { skip }, async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await t.rejects(
    db.transaction(async (tx) => {
      await tx.query("INSERT INTO merchants (id) VALUES ('late-1')")
      await tx.query('SELECT pg_sleep(0.3)')
      await tx.query('SELECT commit_deadline_guard(100)')
    }),
    { name: 'StorageUnavailableError', cause: { code: '57014' } },
    'refused with query_canceled',
  )
  t.equal(await merchantStored(db, 'late-1'), false, 'and rolled back')
  await db.transaction(async (tx) => {
    await tx.query("INSERT INTO merchants (id) VALUES ('in-time-1')")
    await tx.query('SELECT commit_deadline_guard(10000)')
  })
  t.equal(await merchantStored(db, 'in-time-1'), true, 'a COMMIT within its budget commits')

  const budgeted = openPostgres({ url: postgresUrl as string, schema: db.schema as string, ...LIMITS })
  t.teardown(() => budgeted.close())
  await t.rejects(
    budgeted.transaction(async (tx) => {
      await tx.query("INSERT INTO merchants (id) VALUES ('slow-1')")
      await sleep(LIMITS.statementTimeoutMs + 100)
    }),
    StorageUnavailableError,
    'a write that overran its budget is not committed',
  )
  t.equal(await merchantStored(db, 'slow-1'), false)
})

t.test('a connection terminated while checked out: an error for that write, no crash', { skip }, async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const admin = openPostgres({ url: postgresUrl as string, max: 1 })
  t.teardown(() => admin.close())
  const error = await db
    .transaction(async (tx) => {
      const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid])
      // The termination reaches this idle, checked-out client as an 'error' event: it must not be unhandled.
      await sleep(200)
      await tx.query("INSERT INTO merchants (id) VALUES ('terminated-1')")
    })
    .then(
      () => null,
      (e: unknown) => e,
    )
  t.type(error, StorageUnavailableError, 'the write fails as unavailable')
  t.equal(await merchantStored(db, 'terminated-1'), false)
  t.equal((await db.query<{ n: number }>('SELECT 1 AS n')).rows[0]?.n, 1, 'the pool serves the next query')
})

t.test('the service over a failing database: 503 901 for writes, checks from memory, then recovery', { skip }, async (t) => {
  const direct = await freshDatabase(t)
  await migrate(direct)
  const { proxy, db } = await proxied(t, direct.schema as string)
  const ta = await buildTestApp(t, { db, env: { DB_CONNECT_TIMEOUT_MS: '500', DB_STATEMENT_TIMEOUT_MS: '500' } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const grant = (act: string) =>
    ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act, domain: 'm1' } } })
  t.equal((await grant('read')).statusCode, 200)

  proxy.cut()
  const refused = await grant('refund')
  t.equal(refused.statusCode, 503)
  t.equal((refused.json() as { response_code: string }).response_code, '901', 'storage unavailable')
  const es = await ta.call({ method: 'GET', url: '/readyz?lang=es', token: null, headers: { 'accept-language': 'es' } })
  t.equal(es.statusCode, 503, '/readyz says not ready')
  const check = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  t.same((check.json() as { data: unknown }).data, { allowed: true }, 'checks answer from memory during the outage')
  const spanish = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant?lang=es', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'cancel', domain: 'm1' } } })
  t.match((spanish.json() as { response_text: string }).response_text, /almacenamiento/, 'localised')

  proxy.restore()
  const after = await grant('refund')
  t.equal(after.statusCode, 200, 'the next write after recovery works')
  const rows = await direct.query("SELECT v3 FROM casbin_rule WHERE ptype = 'p' AND v0 = 'clerk' ORDER BY v3")
  t.same(
    rows.rows.map((r) => r.v3),
    ['read', 'refund'],
    'exactly the acknowledged writes are stored (the refused cancel is not)',
  )
  const audit = await direct.query("SELECT act FROM permission_audit WHERE target_id = 'clerk' ORDER BY id")
  t.same(
    audit.rows.map((r) => r.act),
    ['read', 'refund'],
    'each once, with its audit row',
  )
})
