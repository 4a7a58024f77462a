/**
 * Account lifecycle: the admin UI lists and reads
 * accounts, moves one to another sub-role, switches it off and on; anyone
 * changes their own password; an operator resets a locked-out admin's. Every
 * rule on both databases, the cross-replica refusal on PostgreSQL.
 */
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { runCli } from '../../src/cli/run.js'
import type { Account } from '../../src/domain/principals.js'
import { ROOT_EMAIL, TEST_SECRET, backend, buildTestApp, freshDatabase, onboard, postgresUrl, register, secondConnection, type TestApp } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { EVENTUALLY_MS, eventually } from '../support/eventually.js'

function expectError(t: Test, res: LightMyRequestResponse, status: number, code: string): void {
  t.equal(res.statusCode, status, `status ${status}: ${res.body}`)
  t.equal((res.json() as { response_code?: string }).response_code, code, `response_code ${code}`)
  t.same(errorShapeProblems(res), [], 'an envelope')
}

const grant = (ta: TestApp, role: string, obj: string, act: string, domain: string, token = ta.rootToken) =>
  ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, token, body: { command: 'grant-role-permission', data: { obj, act, domain } } })

const login = (ta: TestApp, email: string, password: string) =>
  ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email, password } } })

type Page = { items: Array<Account & { password_hash?: string; is_root?: boolean }>; total: number; page: number; page_size: number }

async function world(t: Test, db?: Awaited<ReturnType<typeof freshDatabase>>) {
  const ta = await buildTestApp(t, db !== undefined ? { db } : {})
  const owner1 = await onboard(ta, 'm1')
  const owner2 = await onboard(ta, 'm2')
  const clerk = await register(ta, { email: 'Clerk.One@m1.example', sub_role_code: 'clerk', merchant_id: 'm1', name: 'Clerk 50%_off' })
  const viewer = await register(ta, { email: 'viewer@m1.example', sub_role_code: 'viewer', merchant_id: 'm1' })
  const other = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk', merchant_id: 'm2' })
  const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'support' })
  return { ta, owner1, owner2, clerk, viewer, other, staff }
}

t.test('listing and reading accounts', async (t) => {
  const { ta, owner1, clerk, other, staff } = await world(t)
  const list = async (query: string, token = ta.rootToken) => {
    const res = await ta.call({ method: 'GET', url: `/v2/admin/accounts${query}`, token })
    t.equal(res.statusCode, 200, `${query}: ${res.body}`)
    return (res.json() as { data: Page }).data
  }
  const all = await list('')
  t.equal(all.total, 7, 'root sees every account')
  t.equal(all.items[0]?.email, staff.email, 'newest first')
  t.ok(all.items.every((a) => a.status === 'active' && a.password_hash === undefined), 'with their status, never a hash')
  t.same(
    all.items.filter((a) => a.is_root).map((a) => a.email).sort(),
    all.items.filter((a) => a.sub_role_code === 'super_admin').map((a) => a.email).sort(),
    'is_root: the accounts of the root sub-role',
  )
  t.same((await list('?merchant_id=m1')).items.map((a) => a.email).sort(), ['Clerk.One@m1.example', 'owner@m1.example', 'viewer@m1.example'])
  t.same((await list('?sub_role_code=clerk')).items.map((a) => a.id).sort(), [clerk.id, other.id].sort())
  t.same((await list('?q=CLERK.one')).items.map((a) => a.id), [clerk.id], 'q: case-insensitive substring of the e-mail')
  t.same((await list('?q=50%25_')).items.map((a) => a.id), [clerk.id], 'q: of the name, with LIKE wildcards taken literally')
  t.equal((await list('?q=5_')).total, 0)
  const paged = await list('?page=2&page_size=3')
  t.same([paged.page, paged.page_size, paged.total, paged.items.length], [2, 3, 7, 3])

  const ownerToken = ta.tokenFor(owner1)
  const mine = await list('?merchant_id=m2', ownerToken)
  t.same(mine.items.map((a) => a.merchant_id), ['m1', 'm1', 'm1'], 'a merchant caller sees only its merchant, whatever it asks')
  t.equal((await ta.call({ method: 'GET', url: `/v2/admin/accounts/${clerk.id}`, token: ownerToken })).statusCode, 200)
  expectError(t, await ta.call({ method: 'GET', url: `/v2/admin/accounts/${other.id}`, token: ownerToken }), 404, '401')
  expectError(t, await ta.call({ method: 'GET', url: `/v2/admin/accounts/${staff.id}`, token: ownerToken }), 404, '401')
  expectError(t, await ta.call({ method: 'GET', url: '/v2/admin/accounts/00000000-0000-4000-8000-000000000000' }), 404, '401')
  expectError(t, await ta.call({ method: 'GET', url: '/v2/admin/accounts', token: ta.tokenFor(clerk) }), 403, '300')
  expectError(t, await ta.call({ method: 'GET', url: '/v2/admin/accounts?status=asleep' }), 400, '100')
})

t.test('change-sub-role: one transaction, at once in checks and guards, never an escalation', async (t) => {
  const { ta, owner1, clerk, viewer } = await world(t)
  t.equal((await grant(ta, 'auditor', 'reports', 'read', 'm1')).statusCode, 200)
  const move = (id: string, code: string, token = ta.rootToken) =>
    ta.call({ method: 'POST', url: `/v2/admin/accounts/${id}/sub-role`, token, body: { command: 'change-sub-role', data: { sub_role_code: code } } })
  const check = async (user: Account) =>
    ((await ta.call({ method: 'GET', url: `/v2/authz/check?obj=reports&act=read&user_id=${user.id}` })).json() as { data: { allowed: boolean } }).data.allowed

  t.equal(await check(clerk), false)
  const moved = await move(clerk.id, 'auditor')
  t.equal(moved.statusCode, 200)
  const data = (moved.json() as { data: { changed: boolean; revision: number; account: Account } }).data
  t.same([data.changed, data.account.sub_role_code], [true, 'auditor'])
  t.equal(await check(clerk), true, 'the new sub-role counts at once')
  const rows = await ta.service.db.query("SELECT v1, v2 FROM casbin_rule WHERE ptype = 'g' AND v0 = $1", [clerk.id])
  t.same(rows.rows, [{ v1: 'auditor', v2: 'm1' }], 'the g row moved')
  const audit = await ta.service.db.query("SELECT target_id FROM permission_audit WHERE action = 'role_changed'")
  t.same(audit.rows, [{ target_id: clerk.id }], 'audited once')
  t.equal(((await move(clerk.id, 'auditor')).json() as { data: { changed: boolean } }).data.changed, false, 'a repeat changes nothing')
  t.equal((await ta.service.db.query("SELECT 1 FROM permission_audit WHERE action = 'role_changed'")).rows.length, 1)

  expectError(t, await move(viewer.id, 'super_admin'), 400, '108')
  expectError(t, await move(owner1.id, 'clerk'), 400, '108')

  // A merchant manager with admin:manage may hand out only what it holds.
  const manager = await register(ta, { email: 'manager@m1.example', sub_role_code: 'manager', merchant_id: 'm1' }, ta.tokenFor(owner1))
  for (const [obj, act] of [
    ['admin', 'manage'],
    ['admin', 'read'],
  ]) {
    t.equal((await grant(ta, 'manager', obj as string, act as string, 'm1')).statusCode, 200)
  }
  // The account holds nothing the manager lacks: the new sub-role is what it may not hand out (a grant's code and text).
  expectError(t, await move(viewer.id, 'auditor', ta.tokenFor(manager)), 403, '302')
  t.equal((await grant(ta, 'manager', 'reports', 'read', 'm1')).statusCode, 200)
  t.equal((await move(viewer.id, 'auditor', ta.tokenFor(manager))).statusCode, 200, 'once it holds reports:read itself')
  expectError(t, await move(clerk.id, 'viewer', ta.tokenFor(clerk)), 403, '300')
})

t.test('a non-root caller changes only accounts whose effective set it holds', async (t) => {
  const { ta, owner1 } = await world(t)
  // Two sub-admins of m1 who may manage accounts; the peer also approves payouts, the caller does not.
  for (const role of ['desk', 'payer']) {
    for (const [obj, act] of [
      ['admin', 'manage'],
      ['admin', 'read'],
    ] as const) {
      t.equal((await grant(ta, role, obj, act, 'm1')).statusCode, 200)
    }
  }
  t.equal((await grant(ta, 'payer', 'payouts', 'approve', 'm1')).statusCode, 200)
  const caller = await register(ta, { email: 'desk@m1.example', sub_role_code: 'desk', merchant_id: 'm1' })
  const peer = await register(ta, { email: 'payer@m1.example', sub_role_code: 'payer', merchant_id: 'm1' })
  const token = ta.tokenFor(caller)
  const move = (code: string, as = token, lang = 'en') =>
    ta.call({ method: 'POST', url: `/v2/admin/accounts/${peer.id}/sub-role?lang=${lang}`, token: as, body: { command: 'change-sub-role', data: { sub_role_code: code } } })
  const status = (what: 'deactivate' | 'reactivate', as = token, lang = 'en') =>
    ta.call({ method: 'POST', url: `/v2/admin/accounts/${peer.id}/${what}?lang=${lang}`, token: as, body: { command: `${what}-admin`, data: {} } })
  const account = async () => ((await ta.call({ method: 'GET', url: `/v2/admin/accounts/${peer.id}` })).json() as { data: Account }).data
  /** The peer rule's own code, and a text naming what the caller lacks, in each language. */
  const peerRefusal = async (name: string, call: (lang: string) => Promise<LightMyRequestResponse>) => {
    const texts: Record<string, string> = {
      en: 'You cannot change this account: it holds payouts:approve in m1, which you do not hold yourself.',
      es: 'No puede modificar esta cuenta: tiene payouts:approve en m1, que usted no tiene.',
    }
    for (const [lang, text] of Object.entries(texts)) {
      const res = await call(lang)
      expectError(t, res, 403, '304')
      t.equal((res.json() as { response_text: string }).response_text, text, `${name} (${lang})`)
    }
  }

  // The list tells each caller what it may do to each row, by the same rules the commands apply below.
  const allowed = async (as: string) =>
    ((await ta.call({ method: 'GET', url: '/v2/admin/accounts?merchant_id=m1&page_size=100', token: as })).json() as { data: { items: Array<{ id: string; allowed_actions: string[] }> } }).data.items.find((a) => a.id === peer.id)?.allowed_actions
  t.same(await allowed(token), [], 'the weaker caller is offered nothing on the stronger peer')
  t.same(await allowed(ta.tokenFor(owner1)), ['change-sub-role', 'deactivate'], 'the merchant super_admin is offered both')
  await peerRefusal('change-sub-role', (lang) => move('empty', token, lang))
  await peerRefusal('deactivate', (lang) => status('deactivate', token, lang))
  t.match(await account(), { sub_role_code: 'payer', status: 'active' }, 'the peer keeps its sub-role and stays on')
  t.equal((await status('deactivate', ta.tokenFor(owner1))).statusCode, 200, 'the merchant super_admin may')
  await peerRefusal('reactivate', (lang) => status('reactivate', token, lang))
  expectError(t, await move('empty'), 403, '304')
  t.match(await account(), { sub_role_code: 'payer', status: 'deactivated' }, 'a deactivated peer is judged by the set it would get back')

  t.equal((await grant(ta, 'desk', 'payouts', 'approve', 'm1')).statusCode, 200)
  t.same(await allowed(token), ['change-sub-role', 'reactivate'], 'once the caller holds payouts:approve itself, the list offers it')
  t.equal((await status('reactivate')).statusCode, 200, 'once the caller holds payouts:approve itself')
  t.equal((await status('deactivate')).statusCode, 200)
  t.equal((await status('reactivate')).statusCode, 200)
  t.equal((await move('empty')).statusCode, 200)
  t.match(await account(), { sub_role_code: 'empty', status: 'active' })
})

t.test('deactivate and reactivate: tokens, logins and checks refused at once, older tokens for good', async (t) => {
  const { ta, owner1, clerk } = await world(t)
  const token = ta.tokenFor(clerk)
  const profile = () => ta.call({ method: 'GET', url: '/v2/profile', token })
  t.equal((await profile()).statusCode, 200, 'the token works (and is now in the verified-token cache)')
  t.equal((await grant(ta, 'clerk', 'orders', 'read', 'm1')).statusCode, 200)
  const status = (id: string, what: 'deactivate' | 'reactivate', as = ta.rootToken) =>
    ta.call({ method: 'POST', url: `/v2/admin/accounts/${id}/${what}`, token: as, body: { command: `${what}-admin`, data: {} } })

  const off = await status(clerk.id, 'deactivate')
  t.equal(off.statusCode, 200)
  t.equal((off.json() as { data: { account: Account } }).data.account.status, 'deactivated')
  expectError(t, await profile(), 401, '201')
  expectError(t, await login(ta, 'clerk.one@m1.example', 'admin-pass-123'), 401, '203')
  const check = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  t.same((check.json() as { data: unknown }).data, { allowed: false }, 'checks about it answer false')
  const listed = await ta.call({ method: 'GET', url: '/v2/admin/accounts?status=deactivated' })
  t.same((listed.json() as { data: Page }).data.items.map((a) => a.id), [clerk.id])
  t.equal(((await status(clerk.id, 'deactivate')).json() as { data: { changed: boolean } }).data.changed, false, 'idempotent')

  t.equal((await status(clerk.id, 'reactivate')).statusCode, 200)
  expectError(t, await profile(), 401, '201')
  const relogged = await login(ta, 'clerk.one@m1.example', 'admin-pass-123')
  t.equal(relogged.statusCode, 200, 'the account logs in again')
  const fresh = (relogged.json() as { data: { access_token: string } }).data.access_token
  t.equal((await ta.call({ method: 'GET', url: '/v2/profile', token: fresh })).statusCode, 200, 'and a token issued after the reactivation works')
  const actions = await ta.service.db.query("SELECT action FROM permission_audit WHERE target_id = $1 AND action IN ('deactivated', 'reactivated') ORDER BY id", [clerk.id])
  t.same(actions.rows.map((r) => r.action), ['deactivated', 'reactivated'])

  // Root accounts: only root callers; the last system owner stays on.
  const manager = await register(ta, { email: 'm@example.com', sub_role_code: 'ops' })
  t.equal((await grant(ta, 'ops', 'admin', 'manage', 'global')).statusCode, 200)
  const rootRefused = await status(owner1.id, 'deactivate', ta.tokenFor(manager))
  expectError(t, rootRefused, 403, '304')
  t.match((rootRefused.json() as { response_text: string }).response_text, /^You cannot change this account: it holds \S+ in m1/, 'naming what the caller lacks')
  t.equal((await status(owner1.id, 'deactivate')).statusCode, 200, 'root may switch a merchant super_admin off')
  expectError(t, await status(ta.root.id, 'deactivate'), 409, '502')
})

t.test('change-password and password reset refuse every older token', async (t) => {
  const db = await freshDatabase(t)
  const { ta, clerk } = await world(t, db)
  const oldToken = ta.tokenFor(clerk)
  t.equal((await ta.call({ method: 'GET', url: '/v2/profile', token: oldToken })).statusCode, 200)
  const change = (current: string, next: string, token: string) =>
    ta.call({ method: 'POST', url: '/v2/profile/password', token, body: { command: 'change-password', data: { current_password: current, new_password: next } } })

  const wrong = await change('not-my-password', 'a-new-passphrase', oldToken)
  expectError(t, wrong, 400, '109')
  t.match(wrong.body, /current_password/)
  expectError(t, await change('admin-pass-123', 'short', oldToken), 400, '100')

  const changed = await change('admin-pass-123', 'a-new-passphrase', oldToken)
  t.equal(changed.statusCode, 200)
  const fresh = (changed.json() as { data: { access_token: string; revision: number } }).data
  expectError(t, await ta.call({ method: 'GET', url: '/v2/profile', token: oldToken }), 401, '201')
  const mine = await ta.call({ method: 'GET', url: '/v2/profile', token: fresh.access_token })
  t.equal(mine.statusCode, 200, 'the answer carries a token that works')
  t.equal(mine.json().data.must_change_password, false, 'a password its owner chose is not to be changed')
  expectError(t, await login(ta, 'clerk.one@m1.example', 'admin-pass-123'), 401, '203')
  t.equal((await login(ta, 'clerk.one@m1.example', 'a-new-passphrase')).statusCode, 200)

  const out: string[] = []
  const code = await runCli(['password', 'reset', '--email', 'CLERK.ONE@m1.example'], {
    env: { DATABASE_URL: postgresUrl ?? 'pglite://memory', JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' },
    db,
    io: { out: (line) => out.push(line), err: (line) => out.push(line) },
  })
  t.equal(code, 0, out.join('\n'))
  const printed = /new password for .*: (\S+)$/.exec(out[0] ?? '')?.[1] ?? ''
  t.ok(printed.length >= 20, 'a long random password, printed once')
  await ta.service.replica.sync()
  expectError(t, await ta.call({ method: 'GET', url: '/v2/profile', token: fresh.access_token }), 401, '201')
  const afterReset = await login(ta, 'clerk.one@m1.example', printed)
  t.equal(afterReset.statusCode, 200, 'the printed password works')
  const resetToken = (afterReset.json() as { data: { access_token: string } }).data.access_token
  t.equal((await ta.call({ method: 'GET', url: '/v2/profile', token: resetToken })).json().data.must_change_password, true, 'a reset password is to be changed')
  const chosen = await change(printed, 'chosen-after-reset', resetToken)
  t.equal(chosen.statusCode, 200)
  const chosenToken = (chosen.json() as { data: { access_token: string } }).data.access_token
  t.equal((await ta.call({ method: 'GET', url: '/v2/profile', token: chosenToken })).json().data.must_change_password, false, 'changing it clears the mark')
  const actions = await db.query("SELECT action, actor_id FROM permission_audit WHERE target_id = $1 AND action LIKE 'password%' ORDER BY id", [clerk.id])
  t.same(actions.rows, [
    { action: 'password_changed', actor_id: clerk.id },
    { action: 'password_reset', actor_id: 'system' },
    { action: 'password_changed', actor_id: clerk.id },
  ])
  const missing = await runCli(['password', 'reset', '--email', 'nobody@example.com'], {
    env: { DATABASE_URL: postgresUrl ?? 'pglite://memory', JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' },
    db,
    io: { out: () => undefined, err: () => undefined },
  })
  t.equal(missing, 1)
  t.equal(ROOT_EMAIL.length > 0, true)
})

t.test('on another replica a deactivation comes to refuse the token, for good', { skip: backend === 'postgres' ? false : 'needs PostgreSQL' }, async (t) => {
  const db = await freshDatabase(t)
  const { ta, clerk } = await world(t, db)
  const b = await buildTestApp(t, { db: secondConnection(t, db) })
  const token = ta.tokenFor(clerk)
  t.equal((await b.call({ method: 'GET', url: '/v2/profile', token })).statusCode, 200, "B admits the clerk's token")
  const off = await ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })
  t.equal(off.statusCode, 200)
  const started = Date.now()
  let status = 200
  await eventually(async () => {
    status = (await b.call({ method: 'GET', url: '/v2/profile', token })).statusCode
    return status !== 200
  }, EVENTUALLY_MS, 10)
  t.equal(status, 401, `B refuses it (${Date.now() - started} ms)`)

  // Reactivated on A: B admits tokens issued since, and still refuses the one issued before.
  t.equal((await ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk.id}/reactivate`, body: { command: 'reactivate-admin', data: {} } })).statusCode, 200)
  const fresh = ((await login(ta, 'clerk.one@m1.example', 'admin-pass-123')).json() as { data: { access_token: string } }).data.access_token
  const admitted = await eventually(async () => (await b.call({ method: 'GET', url: '/v2/profile', token: fresh })).statusCode === 200, EVENTUALLY_MS, 10)
  t.ok(admitted, 'B follows the reactivation')
  expectError(t, await b.call({ method: 'GET', url: '/v2/profile', token }), 401, '201')
})
