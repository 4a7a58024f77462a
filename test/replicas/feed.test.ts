/**
 * Several replicas over one PostgreSQL: every change
 * committed through one is applied by the others from the change feed within
 * a second, a read with the revision of a write never answers from before it,
 * races through two replicas end in agreement, and a dropped listener or pool
 * connection neither crashes a replica nor leaves it behind. Two services on
 * one schema, each with its own pool and listener, as two processes would be.
 */
import t, { type Test } from 'tap'
import { syncCatalog } from '../../src/commands/syncCatalog.js'
import { verifyAudit } from '../../src/commands/verifyAudit.js'
import type { Service } from '../../src/compose.js'
import { declaredCatalog } from '../../src/domain/permissions.js'
import type { Account } from '../../src/domain/principals.js'
import type { Queryable } from '../../src/storage/db.js'
import { openPostgres } from '../../src/storage/pg.js'
import { backend, buildTestApp, freshDatabase, onboard, postgresUrl, register, secondConnection, type TestApp } from '../helper.js'
import { EVENTUALLY_MS } from '../support/eventually.js'

const skip = backend === 'postgres' ? false : 'several replicas need PostgreSQL (DATABASE_URL=postgres://…)'

/** A long poll (60 s, past EVENTUALLY_MS), so what the other replica learns comes from the notification, not the poll. */
const ENV = { REVISION_POLL_MS: '60000' }

/** Polls `condition` every 5 ms; resolves with the time it took, or -1 when it never held within `ms`. */
async function within(ms: number, condition: () => boolean | Promise<boolean>): Promise<number> {
  const start = Date.now()
  for (;;) {
    if (await condition()) return Date.now() - start
    if (Date.now() - start > ms) return -1
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

interface Pair {
  a: TestApp
  b: TestApp
  db: Queryable & { schema?: string }
}

async function twoReplicas(t: Test): Promise<Pair> {
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: ENV })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: ENV })
  return { a, b, db }
}

const check = async (ta: TestApp, user: Account, obj: string, act: string, extra = '') => {
  const res = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=${obj}&act=${act}&user_id=${user.id}${extra}` })
  return { status: res.statusCode, allowed: (res.json() as { data?: { allowed: boolean } }).data?.allowed, body: res.body }
}

const roleWrite = (ta: TestApp, action: 'grant' | 'revoke', role: string, obj: string, act: string, domain: string, token = ta.rootToken) =>
  ta.call({
    method: action === 'grant' ? 'POST' : 'DELETE',
    url: `/v2/admin/permissions/roles/${role}/${action}`,
    token,
    body: { command: `${action}-role-permission`, data: { obj, act, domain } },
  })

const userWrite = (ta: TestApp, action: 'grant' | 'deny' | 'revoke', user: Account, obj: string, act: string) =>
  ta.call({
    method: action === 'revoke' ? 'DELETE' : 'POST',
    url: `/v2/admin/permissions/users/${user.id}/${action}`,
    body: { command: `${action}-user-permission`, data: { obj, act } },
  })

const revisionOf = (res: { json(): unknown }) => (res.json() as { data: { revision: number } }).data.revision

t.test('a change through one replica is applied by the other, by notification', { skip }, async (t) => {
  const { a, b } = await twoReplicas(t)
  await onboard(a, 'm1')
  const clerk = await register(a, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })

  t.ok((await within(EVENTUALLY_MS, () => b.service.accounts.peek(clerk.id) !== undefined)) >= 0, 'registration: B knows the account')
  const profile = await b.call({ method: 'GET', url: '/v2/profile', token: a.tokenFor(clerk) })
  t.equal(profile.statusCode, 200, "the new account's token works on B")

  const steps: Array<{ name: string; write: () => Promise<{ statusCode: number }>; expect: boolean }> = [
    { name: 'role grant', write: () => roleWrite(a, 'grant', 'clerk', 'orders', 'refund', 'm1'), expect: true },
    { name: 'deny override', write: () => userWrite(a, 'deny', clerk, 'orders', 'refund'), expect: false },
    { name: 'override removed', write: () => userWrite(a, 'revoke', clerk, 'orders', 'refund'), expect: true },
    { name: 'role revoke', write: () => roleWrite(a, 'revoke', 'clerk', 'orders', 'refund', 'm1'), expect: false },
    { name: 'allow override', write: () => userWrite(a, 'grant', clerk, 'orders', 'refund'), expect: true },
  ]
  for (const step of steps) {
    t.equal((await step.write()).statusCode, 200, `${step.name} through A`)
    const took = await within(EVENTUALLY_MS, async () => (await check(b, clerk, 'orders', 'refund')).allowed === step.expect)
    t.ok(took >= 0, `${step.name}: B answers ${step.expect} (${took} ms)`)
  }

  // The catalog: a pair that leaves the code is inactive on every replica, and back again.
  const without = declaredCatalog().filter((p) => !(p.obj === 'orders' && p.act === 'refund'))
  await syncCatalog(a.service, without)
  t.ok((await within(EVENTUALLY_MS, () => !b.service.engine.isActive('orders', 'refund'))) >= 0, 'catalog deactivation reaches B')
  t.equal((await check(b, clerk, 'orders', 'refund')).allowed, false, 'and B stops allowing the pair')
  await syncCatalog(a.service, declaredCatalog())
  t.ok((await within(EVENTUALLY_MS, () => b.service.engine.isActive('orders', 'refund'))) >= 0, 'catalog reactivation reaches B')

  // The route guard: a permission revoked through A stops the admin on B.
  const granter = await register(a, { email: 'granter@example.com', sub_role_code: 'granter' })
  for (const [obj, act] of [
    ['permission', 'assign'],
    ['orders', 'read'],
  ] as const) {
    t.equal((await roleWrite(a, 'grant', 'granter', obj, act, 'global')).statusCode, 200)
  }
  const revoked = await roleWrite(a, 'revoke', 'granter', 'permission', 'assign', 'global')
  t.equal(revoked.statusCode, 200)
  await b.service.replica.waitFor(revisionOf(revoked), 1000)
  const attempt = await roleWrite(b, 'grant', 'clerk', 'orders', 'read', 'global', b.tokenFor(granter))
  t.equal(attempt.statusCode, 403, "B's route guard refuses the admin whose permission:assign was revoked through A")
})

t.test('a check with the revision of a revoke is never allowed on another replica', { skip }, async (t) => {
  const { a, b } = await twoReplicas(t)
  await onboard(a, 'm1')
  const clerk = await register(a, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  let allowedAfterRevoke = 0
  let answered = 0
  for (let i = 0; i < 40; i++) {
    const granted = await roleWrite(a, 'grant', 'clerk', 'orders', 'cancel', 'm1')
    const seen = await check(b, clerk, 'orders', 'cancel', `&domain=m1&min_revision=${revisionOf(granted)}`)
    if (seen.status === 200 && seen.allowed !== true) t.fail(`after grant ${i}: ${seen.body}`)
    const revoked = await roleWrite(a, 'revoke', 'clerk', 'orders', 'cancel', 'm1')
    const after = await check(b, clerk, 'orders', 'cancel', `&domain=m1&min_revision=${revisionOf(revoked)}`)
    if (after.status === 200) answered++
    if (after.allowed === true) allowedAfterRevoke++
  }
  t.equal(allowedAfterRevoke, 0, 'no stale allow')
  t.equal(answered, 40, 'every check answered within the wait')
})

/** What the database holds for one pair of the clerk role in m1. */
async function stored(db: Queryable, obj: string, act: string): Promise<boolean> {
  const { rows } = await db.query("SELECT 1 FROM casbin_rule WHERE ptype = 'p' AND v0 = 'clerk' AND v1 = 'm1' AND v2 = $1 AND v3 = $2", [obj, act])
  return rows.length > 0
}

t.test('grant/revoke races through two replicas end in agreement', { skip }, async (t) => {
  const { a, b, db } = await twoReplicas(t)
  await onboard(a, 'm1')
  const clerk = await register(a, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const before = Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM permission_audit')).rows[0]?.n)
  const race = async (ta: TestApp, seed: number) => {
    let changed = 0
    for (let i = 0; i < 500; i++) {
      const action = (i * 7 + seed) % 3 === 0 ? 'revoke' : 'grant'
      const res = await roleWrite(ta, action, 'clerk', 'orders', 'read', 'm1')
      if (res.statusCode !== 200) t.fail(`write ${i}: ${res.statusCode} ${res.body}`)
      else if ((res.json() as { data: { changed: boolean } }).data.changed) changed++
    }
    return changed
  }
  const [changedA, changedB] = await Promise.all([race(a, 0), race(b, 1)])
  const head = Number((await db.query<{ r: string }>('SELECT revision::text AS r FROM store_revision')).rows[0]?.r)
  for (const [name, ta] of [
    ['A', a],
    ['B', b],
  ] as const) {
    t.equal(await ta.service.replica.waitFor(head, 2000), true, `${name} reaches the database's revision`)
  }
  const truth = await stored(db, 'orders', 'read')
  t.equal(a.service.engine.decide(clerk, 'm1', 'orders', 'read'), truth, 'A agrees with the database')
  t.equal(b.service.engine.decide(clerk, 'm1', 'orders', 'read'), truth, 'B agrees with the database')
  t.equal((await check(b, clerk, 'orders', 'read')).allowed, truth, "B's check agrees")
  const after = Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM permission_audit')).rows[0]?.n)
  t.equal(after - before, changedA + changedB, 'one audit row per change that an answer reported')
  const chain = await verifyAudit(db)
  t.equal(chain.problem, null, 'the audit chain is whole')
})

/** The backends of one replica's connections on this test's schema, found by their application name. */
async function backends(admin: Queryable, schema: string, which: 'feed' | 'pool'): Promise<number[]> {
  const name = `admin-permission-service:${schema}`
  const { rows } = await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
    which === 'feed' ? `${name}:feed` : name,
  ])
  return rows.map((r) => r.pid)
}

t.test('terminated listener and pool connections: no crash, and the replica converges', { skip }, async (t) => {
  const { a, b, db } = await twoReplicas(t)
  const schema = db.schema as string
  const admin = openPostgres({ url: postgresUrl as string, max: 1 })
  t.teardown(() => admin.close())
  await onboard(a, 'm1')
  const clerk = await register(a, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })

  const listeners = await backends(admin, schema, 'feed')
  t.equal(listeners.length, 2, 'each replica listens on a connection of its own')
  await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [listeners])
  t.equal((await roleWrite(a, 'grant', 'clerk', 'payouts', 'read', 'm1')).statusCode, 200)
  const took = await within(EVENTUALLY_MS, async () => (await check(b, clerk, 'payouts', 'read')).allowed === true)
  t.ok(took >= 0, `after its listener was terminated, B still learns of A's grant (${took} ms)`)
  t.ok((await within(EVENTUALLY_MS, async () => (await backends(admin, schema, 'feed')).length === 2)) >= 0, 'both listeners are back')

  // Pool connections of both replicas terminated again and again while writes run through both.
  let killing = true
  const killer = (async () => {
    while (killing) {
      await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [await backends(admin, schema, 'pool')])
      await new Promise((resolve) => setTimeout(resolve, 15))
    }
  })()
  const statuses = new Map<number, number>()
  const writes = async (ta: TestApp) => {
    for (let i = 0; i < 60; i++) {
      const res = await roleWrite(ta, i % 2 === 0 ? 'grant' : 'revoke', 'clerk', 'customers', 'export', 'm1')
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      if (res.statusCode !== 200) t.equal((res.json() as { response_code: string }).response_code, '901', `a failed write is 503 901, not ${res.body}`)
    }
  }
  await Promise.all([writes(a), writes(b)])
  killing = false
  await killer
  t.same(
    [...statuses.keys()].filter((s) => s !== 200 && s !== 503),
    [],
    `only 200 and 503 answers (${JSON.stringify(Object.fromEntries(statuses))})`,
  )
  t.equal((await roleWrite(a, 'grant', 'clerk', 'customers', 'read', 'm1')).statusCode, 200, 'the next write works')
  const head = Number((await db.query<{ r: string }>('SELECT revision::text AS r FROM store_revision')).rows[0]?.r)
  for (const ta of [a, b]) t.equal(await ta.service.replica.waitFor(head, 3000), true, 'both replicas reach the head')
  const truth = await stored(db, 'customers', 'export')
  for (const s of [a.service, b.service] as Service[]) t.equal(s.engine.decide(clerk, 'm1', 'customers', 'export'), truth, 'memory agrees with the database')
  t.equal((await verifyAudit(db)).problem, null, 'the audit chain is whole')
})
