/**
 * Rules a mutation run showed no test would miss if they were broken: each
 * test here fails when its rule is.
 *
 * - The no-escalation rule is judged in the target domain, not the caller's
 *   home domain (role grants and revokes, user overrides and their removal).
 * - Writes of one process run one at a time: concurrent grants and revokes
 *   of one pair, with reloads meanwhile, leave memory deciding exactly as
 *   the database says.
 * - Every column of an audit row is in its hash.
 * - The role listing leaves out pairs the role is denied.
 * - onboardMerchant refuses a merchant actor by itself, not only behind the
 *   route guard.
 */
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import type { Caller } from '../../src/commands/context.js'
import { grantRolePermission, revokeRolePermission } from '../../src/commands/changeRolePermission.js'
import { onboardMerchant } from '../../src/commands/onboardMerchant.js'
import { registerAdmin } from '../../src/commands/registerAdmin.js'
import { revokeUserPermission, setUserPermission } from '../../src/commands/userOverrides.js'
import { verifyAudit } from '../../src/commands/verifyAudit.js'
import type { Account } from '../../src/domain/principals.js'
import { insertRule } from '../../src/storage/policyRows.js'
import type { Database } from '../../src/storage/db.js'
import { backend, buildTestApp, buildTestService, freshDatabase, onboard, register, type TestApp } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { changedTables, cheapPasswords, fingerprint } from '../support/security.js'

const pair = (command: string, obj: string, act: string, domain?: string) => ({
  command,
  data: { obj, act, ...(domain !== undefined ? { domain } : {}) },
})

function expectRefused(t: Test, res: LightMyRequestResponse, status: number, code: string, what: string): void {
  t.equal(res.statusCode, status, `${what}: ${status}`, { body: res.body })
  t.equal((res.json() as { response_code?: string }).response_code, code, `${what}: code ${code}`)
  t.same(errorShapeProblems(res), [], `${what}: an error envelope`)
}

/**
 * The service's database, counting the write transactions it has open at
 * once: the write queue's promise is that this never exceeds one (PGlite
 * would serialise them anyway, and PostgreSQL's revision row lock orders
 * their commits, so neither shows it by itself).
 */
function countingTransactions(db: Database & { schema?: string }): { db: Database; peak(): number; reset(): void } {
  let open = 0
  let peak = 0
  const counted: Database & { schema?: string } = {
    kind: db.kind,
    ...(db.schema !== undefined ? { schema: db.schema } : {}),
    query: (text, params) => db.query(text, params),
    queryArrays: (text, params) => db.queryArrays(text, params),
    exec: (script) => db.exec(script),
    snapshot: (work) => db.snapshot(work),
    ...(db.listen !== undefined ? { listen: db.listen.bind(db) } : {}),
    close: () => db.close(),
    async transaction(work, options) {
      open++
      peak = Math.max(peak, open)
      try {
        return await db.transaction(work, options)
      } finally {
        open--
      }
    },
  }
  return { db: counted, peak: () => peak, reset: () => (peak = open) }
}

interface World {
  ta: TestApp
  transactions: { peak(): number; reset(): void }
  m1Owner: Account
  m1Clerk: Account
  m2Clerk: Account
}

async function world(t: Test): Promise<World> {
  const transactions = countingTransactions(await freshDatabase(t))
  const ta = await buildTestApp(t, { service: await buildTestService(t, { db: transactions.db, passwords: cheapPasswords() }) })
  const m1Owner = await onboard(ta, 'm1')
  const m2Owner = await onboard(ta, 'm2')
  const m1Clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(m1Owner))
  const m2Clerk = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk' }, ta.tokenFor(m2Owner))
  return { ta, transactions, m1Owner, m1Clerk, m2Clerk }
}

t.test(`mutation survivors, killed (${backend})`, async (t) => {
  const w = await world(t)
  const { ta } = w
  const db = ta.service.db
  const call = (method: 'POST' | 'DELETE' | 'GET', url: string, body?: unknown, token = ta.rootToken) =>
    ta.call({ method, url, token, ...(body !== undefined ? { body } : {}) })
  const ok = async (t: Test, res: Promise<LightMyRequestResponse>, what: string) => {
    const answer = await res
    t.equal(answer.statusCode, 200, what, { body: answer.body })
  }

  t.test('the escalation check is made in the target domain, not the caller’s home domain', async (t) => {
    // A platform admin holds orders:refund in global through its role, and is denied it in m1 alone.
    const admin = await register(ta, { email: 'ops@platform.example', sub_role_code: 'ops' })
    for (const [obj, act] of [
      ['permission', 'assign'],
      ['permission', 'revoke'],
      ['permission', 'read'],
      ['orders', 'refund'],
    ] as const) {
      await ok(t, call('POST', '/v2/admin/permissions/roles/ops/grant', pair('grant-role-permission', obj, act)), `ops holds ${obj}:${act} in global`)
    }
    await ok(t, call('POST', `/v2/admin/permissions/users/${admin.id}/deny`, pair('deny-user-permission', 'orders', 'refund', 'm1')), 'denied in m1')
    const allowed = (domain: string) => ta.service.engine.decide(admin, domain, 'orders', 'refund')
    t.equal(allowed('global'), true, 'the admin holds orders:refund at home (global)')
    t.equal(allowed('m2'), true, 'and in m2')
    t.equal(allowed('m1'), false, 'but not in m1')

    // Rows for the revokes to take away, set by root.
    await ok(t, call('POST', '/v2/admin/permissions/roles/clerk/grant', pair('grant-role-permission', 'orders', 'refund', 'm1')), 'root grants the clerk role in m1')
    await ok(t, call('POST', `/v2/admin/permissions/users/${w.m1Clerk.id}/grant`, pair('grant-user-permission', 'orders', 'refund')), 'root sets an override on the m1 clerk')
    await ok(t, call('DELETE', '/v2/admin/permissions/roles/clerk/revoke', pair('revoke-role-permission', 'orders', 'refund', 'm1')), 'and takes the role grant away again')

    const token = ta.tokenFor(admin)
    const before = await fingerprint(db)
    expectRefused(t, await call('POST', '/v2/admin/permissions/roles/clerk/grant', pair('grant-role-permission', 'orders', 'refund', 'm1'), token), 403, '302', 'role grant in m1')
    expectRefused(t, await call('POST', `/v2/admin/permissions/users/${w.m1Clerk.id}/grant`, pair('grant-user-permission', 'orders', 'refund'), token), 403, '302', 'allow override for a user of m1')
    expectRefused(t, await call('POST', `/v2/admin/permissions/users/${w.m1Clerk.id}/deny`, pair('deny-user-permission', 'orders', 'refund'), token), 403, '302', 'deny override for a user of m1')
    expectRefused(t, await call('DELETE', `/v2/admin/permissions/users/${w.m1Clerk.id}/revoke`, pair('revoke-user-permission', 'orders', 'refund'), token), 403, '302', 'removing an override of a user of m1')
    await ok(t, call('POST', '/v2/admin/permissions/roles/clerk/grant', pair('grant-role-permission', 'orders', 'refund', 'm1')), 'root grants the clerk role in m1 once more')
    const beforeRevoke = await fingerprint(db)
    expectRefused(t, await call('DELETE', '/v2/admin/permissions/roles/clerk/revoke', pair('revoke-role-permission', 'orders', 'refund', 'm1'), token), 403, '302', 'role revoke in m1')
    t.same(changedTables(beforeRevoke, await fingerprint(db)), [], 'the refused revoke changed nothing')
    t.ok(changedTables(before, beforeRevoke).length > 0, "(root's grant in between did change rows: the marks move)")

    // Where it does hold the pair it may hand it out: the refusals above are about m1, not about the admin.
    await ok(t, call('POST', '/v2/admin/permissions/roles/clerk/grant', pair('grant-role-permission', 'orders', 'refund', 'm2'), token), 'role grant in m2')
    await ok(t, call('POST', `/v2/admin/permissions/users/${w.m2Clerk.id}/grant`, pair('grant-user-permission', 'orders', 'refund'), token), 'allow override for a user of m2')
    await ok(t, call('POST', '/v2/admin/permissions/roles/support/grant', pair('grant-role-permission', 'orders', 'refund'), token), 'role grant in global')
  })

  t.test('the role listing leaves out pairs the role is denied', async (t) => {
    for (const [obj, act, domain] of [
      ['orders', 'read', 'm1'],
      ['orders', 'cancel', 'm1'],
      ['products', 'read', 'm1'],
      ['reports', 'read', 'global'],
    ] as const) {
      await ok(t, call('POST', '/v2/admin/permissions/roles/lister/grant', pair('grant-role-permission', obj, act, domain)), `lister holds ${obj}:${act} in ${domain}`)
    }
    // Deny rows for the role itself, as a platform engineer may write them beside the model: one in the listed
    // domain, one in global (which every merchant domain reads), one in another merchant (which m1's listing ignores).
    const denies = [
      ['lister', 'm1', 'orders', 'read', 'deny'],
      ['lister', 'global', 'products', 'read', 'deny'],
      ['lister', 'm2', 'orders', 'cancel', 'deny'],
    ]
    await db.transaction(async (tx) => {
      for (const rule of denies) await insertRule(tx, 'p', rule)
    })
    await ta.service.reload()
    const listed = async (domain: string) => {
      const res = await call('GET', `/v2/admin/permissions/roles/lister?domain=${domain}`)
      t.equal(res.statusCode, 200, `listing in ${domain}`)
      return (res.json() as { data: { permissions: Array<{ obj: string; act: string; domain: string }> } }).data.permissions.map((p) => `${p.obj}:${p.act}@${p.domain}`)
    }
    const m1 = await listed('m1')
    t.notOk(m1.some((p) => p.startsWith('orders:read@')), `a pair denied in m1 is not listed in m1 (${m1.join(', ')})`)
    t.notOk(m1.some((p) => p.startsWith('products:read@')), 'a pair denied in global is not listed in m1')
    t.ok(m1.includes('orders:cancel@m1'), "a deny in m2 does not reach m1's listing")
    t.ok(m1.includes('reports:read@global'), 'global grants are listed with their domain')
    const m2 = await listed('m2')
    t.notOk(m2.some((p) => p.startsWith('orders:cancel@')) || m2.some((p) => p.startsWith('products:read@')), `nor in m2 (${m2.join(', ')})`)
    // The listing and the decisions agree: a clerk holding the role in m1 is not allowed what the listing leaves out.
    const holder = await register(ta, { email: 'holder@m1.example', sub_role_code: 'lister', merchant_id: 'm1' })
    for (const [obj, act, expected] of [
      ['orders', 'read', false],
      ['products', 'read', false],
      ['orders', 'cancel', true],
    ] as const) {
      t.equal(ta.service.engine.decide(holder, 'm1', obj, act), expected, `the role's holder: ${obj}:${act}`)
    }
  })

  t.test('onboardMerchant refuses a merchant actor by itself', async (t) => {
    const before = await fingerprint(db)
    const input = { merchant_id: 'm-direct', email: 'owner@m-direct.example', password: 'merchant-pass-1', name: 'Direct' }
    await t.rejects(onboardMerchant(ta.service, { id: w.m1Owner.id, type: 'merchant', ip: null }, input), { name: 'ServiceError', code: 'PRINCIPAL_TYPE_DENIED' }, 'a merchant actor')
    t.same(changedTables(before, await fingerprint(db)), [], 'nothing was written')
    t.same((await db.query("SELECT id FROM merchants WHERE id = 'm-direct'")).rows, [], 'no merchant row')
    const made = await onboardMerchant(ta.service, { id: ta.root.id, type: 'system_owner', ip: null }, input)
    t.equal(made.merchant_id, 'm-direct', 'a system-owner actor onboards it')
  })

  t.test('every column of an audit row is in its hash', async (t) => {
    // The row to tamper with is the newest, and has every column set: an override set by a merchant's admin over HTTP.
    await ok(t, call('POST', `/v2/admin/permissions/users/${w.m1Clerk.id}/deny`, pair('deny-user-permission', 'customers', 'export'), ta.tokenFor(w.m1Owner)), 'an override by the m1 owner')
    const newest = (await db.query<Record<string, unknown> & { id: string }>('SELECT *, id::text AS id FROM permission_audit ORDER BY permission_audit.id DESC LIMIT 1')).rows[0]
    if (newest === undefined) throw new Error('no audit rows')
    t.match(newest, { action: 'deny', target_type: 'user', merchant_id: 'm1', domain: 'm1', obj: 'customers', act: 'export' }, 'the override is the newest row')
    t.equal((await verifyAudit(db)).problem, null, 'the chain verifies before any tampering')

    // Every column the table has, beside the chain's own two: a column added later and left out of the hash fails here.
    const columns = (
      await db.query<{ column_name: string; data_type: string }>(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'permission_audit' AND table_schema = current_schema() ORDER BY ordinal_position",
      )
    ).rows.filter((c) => c.column_name !== 'prev_hash' && c.column_name !== 'row_hash')
    t.ok(columns.length >= 12, `${columns.length} columns: ${columns.map((c) => c.column_name).join(', ')}`)

    const tamper = async (sql: string, params: unknown[]) => {
      await db.transaction(async (tx) => {
        await tx.query('ALTER TABLE permission_audit DISABLE TRIGGER permission_audit_no_update_delete')
        await tx.query(sql, params)
        await tx.query('ALTER TABLE permission_audit ENABLE TRIGGER permission_audit_no_update_delete')
      })
    }
    const TARGET_TYPES = ['role', 'user', 'permission']
    for (const { column_name: column, data_type: type } of columns) {
      const original = newest[column]
      const edits: Array<{ label: string; set: string; params: unknown[]; restore: string; id: string; todo?: string }> = []
      if (column === 'id') {
        const moved = String(BigInt(newest.id) + 1000n)
        edits.push({ label: `renumbered to ${moved}`, set: 'id = $2::bigint', params: [moved], restore: `UPDATE permission_audit SET id = $1::bigint WHERE id = ${moved}`, id: moved })
      } else if (type.startsWith('timestamp')) {
        edits.push({ label: 'one second later', set: `${column} = ${column} + interval '1 second'`, params: [], restore: `UPDATE permission_audit SET ${column} = $2 WHERE id = $1::bigint`, id: newest.id })
        // The column keeps microseconds and the hash reads milliseconds (Date.getTime()): an edit below a millisecond
        // leaves the hash as it was. Kept as a known gap until the hash covers what the column stores.
        edits.push({
          label: 'one microsecond later',
          set: `${column} = ${column} + interval '1 microsecond'`,
          params: [],
          restore: `UPDATE permission_audit SET ${column} = $2 WHERE id = $1::bigint`,
          id: newest.id,
          todo: `${column} is stored to the microsecond but hashed to the millisecond`,
        })
      } else {
        const other = column === 'target_type' ? TARGET_TYPES.find((v) => v !== original) : `${String(original)}x`
        edits.push({ label: `set to ${String(other)}`, set: `${column} = $2`, params: [other], restore: `UPDATE permission_audit SET ${column} = $2 WHERE id = $1::bigint`, id: newest.id })
        const nullable = (await db.query<{ is_nullable: string }>("SELECT is_nullable FROM information_schema.columns WHERE table_name = 'permission_audit' AND table_schema = current_schema() AND column_name = $1", [column])).rows[0]
        if (nullable?.is_nullable === 'YES') {
          edits.push({ label: 'set to NULL', set: `${column} = NULL`, params: [], restore: `UPDATE permission_audit SET ${column} = $2 WHERE id = $1::bigint`, id: newest.id })
        }
      }
      for (const edit of edits) {
        await tamper(`UPDATE permission_audit SET ${edit.set} WHERE id = $1::bigint`, [newest.id, ...edit.params])
        const found = await verifyAudit(db)
        t.same(found.problem, { kind: 'edited', id: edit.id }, `${column} ${edit.label}: the row is named`, edit.todo !== undefined ? { todo: edit.todo } : {})
        await tamper(edit.restore, column === 'id' ? [newest.id] : [newest.id, original])
        t.equal((await verifyAudit(db)).problem, null, `${column} restored: the chain verifies again`)
      }
    }
    await t.rejects(db.query('UPDATE permission_audit SET actor_id = actor_id'), /append-only/, 'the trigger is back on')
  })

  t.test('writes run one at a time in process: concurrent grants and revokes with reloads leave memory as the database says', async (t) => {
    const staff = await register(ta, { email: 'staff@platform.example', sub_role_code: 'support' })
    const before = Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM permission_audit')).rows[0]?.n)
    // One pair, every way of writing it, many times over, all at once. The commands are called directly: a request
    // through inject on PGlite runs its whole transaction within one turn of the event loop, so HTTP alone never
    // overlaps two writes there.
    const root: Caller = { account: ta.root, ip: '127.0.0.1' }
    const input = (domain?: string) => ({ obj: 'payouts', act: 'approve', ...(domain !== undefined ? { domain } : {}) })
    const operations: Array<() => Promise<{ changed: boolean }>> = [
      () => grantRolePermission(ta.service, root, 'clerk', input('m1')),
      () => revokeRolePermission(ta.service, root, 'clerk', input('m1')),
      () => grantRolePermission(ta.service, root, 'support', input()),
      () => revokeRolePermission(ta.service, root, 'support', input()),
      () => setUserPermission(ta.service, root, w.m1Clerk.id, input(), 'allow'),
      () => setUserPermission(ta.service, root, w.m1Clerk.id, input(), 'deny'),
      () => revokeUserPermission(ta.service, root, w.m1Clerk.id, input()),
      () => setUserPermission(ta.service, root, staff.id, input('m1'), 'deny'),
      () => revokeUserPermission(ta.service, root, staff.id, input('m1')),
    ]
    // A fixed sequence stands in for a seed.
    let state = 12345
    const next = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31
      return state
    }
    const inFlight: Array<Promise<{ changed: boolean } | null>> = []
    let reloads = 0
    w.transactions.reset()
    for (let i = 0; i < 240; i++) {
      inFlight.push((operations[next() % operations.length] as () => Promise<{ changed: boolean }>)())
      if (i % 20 === 10) {
        reloads++
        inFlight.push(ta.service.reload().then(() => null))
      }
    }
    const settled = await Promise.allSettled(inFlight)
    t.equal(w.transactions.peak(), 1, 'never more than one write transaction open at once')
    const failures = settled.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []))
    t.same(failures, [], `240 writes and ${reloads} reloads, all done`)
    const changed = settled.filter((r) => r.status === 'fulfilled' && r.value !== null && r.value.changed).length
    const after = Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM permission_audit')).rows[0]?.n)
    t.equal(after - before, changed, `each of the ${changed} real changes audited once`)
    t.equal((await verifyAudit(db)).problem, null, 'one unbroken audit chain')

    // A write that fails inside the queue: two registrations of one address pass the check made before the queue
    // together, and the second meets the unique index. The queue must go on with the next write.
    const twice = { email: 'twice@platform.example', password: 'admin-pass-123', name: 'Twice', sub_role_code: 'support' }
    const both = await Promise.allSettled([registerAdmin(ta.service, root, twice), registerAdmin(ta.service, root, twice)])
    t.same(
      both.map((r) => (r.status === 'fulfilled' ? 'registered' : (r.reason as { code?: string }).code)).sort(),
      ['EMAIL_TAKEN', 'registered'],
      'one registration, one EMAIL_TAKEN',
    )
    const afterFailure = await grantRolePermission(ta.service, root, 'clerk', input('m2'))
    t.equal(afterFailure.changed, true, 'the next write runs')

    // Memory against a service loaded fresh from the same database, every decision of the world.
    const fresh = await buildTestService(t, { db, passwords: cheapPasswords() })
    const ids = (await db.query<{ id: string }>('SELECT id::text AS id FROM admin_accounts')).rows.map((r) => r.id)
    const domains = ['global', ...(await db.query<{ id: string }>('SELECT id FROM merchants')).rows.map((r) => r.id)]
    const pairs = ta.service.engine.catalogEntries()
    const mismatches: string[] = []
    let compared = 0
    for (const id of ids) {
      const mine = await ta.service.accounts.get(id)
      const theirs = await fresh.accounts.get(id)
      if (mine === null || theirs === null) {
        mismatches.push(`account ${id} missing`)
        continue
      }
      for (const domain of domains) {
        for (const p of pairs) {
          compared++
          const a = ta.service.engine.decide(mine, domain, p.obj, p.act)
          const b = fresh.engine.decide(theirs, domain, p.obj, p.act)
          if (a !== b) mismatches.push(`${mine.email} in ${domain} ${p.obj}:${p.act}: memory ${a}, database ${b}`)
        }
      }
    }
    for (const role of ['clerk', 'support']) {
      for (const domain of domains) {
        compared++
        const a = ta.service.engine.subRoleAllows(role, domain, 'payouts', 'approve')
        const b = fresh.engine.subRoleAllows(role, domain, 'payouts', 'approve')
        if (a !== b) mismatches.push(`role ${role} in ${domain}: memory ${a}, database ${b}`)
      }
    }
    t.same(mismatches, [], `memory decides as the database (${compared} decisions)`)
  })
})
