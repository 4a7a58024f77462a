import t, { type Test } from 'tap'
import { buildTestApp, onboard, register, type TestApp } from '../helper.js'
import type { Account } from '../../src/domain/principals.js'

interface World {
  ta: TestApp
  m1Owner: Account
  m2Owner: Account
  m1Clerk: Account
  m2Clerk: Account
  staff: Account
}

async function world(t: Test): Promise<World> {
  const ta = await buildTestApp(t)
  const m1Owner = await onboard(ta, 'm1')
  const m2Owner = await onboard(ta, 'm2')
  const m1Clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(m1Owner))
  const m2Clerk = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk' }, ta.tokenFor(m2Owner))
  const staff = await register(ta, { email: 'staff@platform.example', sub_role_code: 'support' })
  return { ta, m1Owner, m2Owner, m1Clerk, m2Clerk, staff }
}

const grantRole = (ta: TestApp, role: string, data: Record<string, unknown>, token = ta.rootToken) =>
  ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, token, body: { command: 'grant-role-permission', data } })
const revokeRole = (ta: TestApp, role: string, data: Record<string, unknown>, token = ta.rootToken) =>
  ta.call({ method: 'DELETE', url: `/v2/admin/permissions/roles/${role}/revoke`, token, body: { command: 'revoke-role-permission', data } })
const userCommand = (ta: TestApp, verb: 'grant' | 'deny' | 'revoke', userId: string, data: Record<string, unknown>, token = ta.rootToken) =>
  ta.call({
    method: verb === 'revoke' ? 'DELETE' : 'POST',
    url: `/v2/admin/permissions/users/${userId}/${verb}`,
    token,
    body: { command: `${verb}-user-permission`, data },
  })
const check = async (ta: TestApp, query: string, token = ta.rootToken) => {
  const res = await ta.call({ method: 'GET', url: `/v2/authz/check?${query}`, token })
  return { status: res.statusCode, allowed: res.statusCode === 200 ? (res.json() as { data: { allowed: boolean } }).data.allowed : undefined, body: res.json() }
}

// Each subtest builds its own world (a fresh database and app) and grants
// what it reads, so a subtest can run, fail or move alone.
t.test('permission rules: effective sets per domain, tenancy, escalation and the catalog', async (t) => {
  t.test('role endpoints default to global; a system owner may pick a merchant domain', async (t) => {
    const w = await world(t)
    const { ta } = w
    const res = await grantRole(ta, 'support', { obj: 'orders', act: 'read' })
    t.equal(res.statusCode, 200)
    t.equal(res.json().data.domain, 'global')
    const inM1 = await grantRole(ta, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    t.equal(inM1.json().data.domain, 'm1')
    t.equal((await check(ta, 'obj=orders&act=cancel', ta.tokenFor(w.m1Clerk))).allowed, true)
    t.equal((await check(ta, 'obj=orders&act=cancel', ta.tokenFor(w.m2Clerk))).allowed, false, 'm1 grant does not reach m2')
    const unknownDomain = await grantRole(ta, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm404' })
    t.equal(unknownDomain.statusCode, 404)
    t.equal(unknownDomain.json().response_code, '402')
  })

  t.test('global role grants reach merchant users in their merchant and system-owner users everywhere', async (t) => {
    const w = await world(t)
    const { ta } = w
    // What the checks below read: staff's global orders:read, the m1 clerks' orders:cancel.
    await grantRole(ta, 'support', { obj: 'orders', act: 'read' })
    await grantRole(ta, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    await grantRole(ta, 'clerk', { obj: 'products', act: 'read' })
    t.equal((await check(ta, 'obj=products&act=read', ta.tokenFor(w.m1Clerk))).allowed, true)
    t.equal((await check(ta, 'obj=products&act=read&domain=m2', ta.tokenFor(w.m1Clerk))).allowed, false, 'never outside its merchant')
    t.equal((await check(ta, 'obj=products&act=read&domain=global', ta.tokenFor(w.m1Clerk))).allowed, false)
    t.equal((await check(ta, 'obj=orders&act=read&domain=m2', ta.tokenFor(w.staff))).allowed, true, 'staff hold global grants in any merchant')
    // A merchant's grant to a sub-role code never reaches system-owner users with that code.
    const platformClerk = await register(ta, { email: 'pclerk@platform.example', sub_role_code: 'clerk' })
    t.equal((await check(ta, 'obj=orders&act=cancel&domain=m1', ta.tokenFor(platformClerk))).allowed, false)
    t.equal((await check(ta, 'obj=products&act=read&domain=m1', ta.tokenFor(platformClerk))).allowed, true)
  })

  t.test('merchant callers are forced to their own merchant', async (t) => {
    const w = await world(t)
    const { ta } = w
    const owner = ta.tokenFor(w.m1Owner)
    const res = await grantRole(ta, 'clerk', { obj: 'payouts', act: 'read', domain: 'm2' }, owner)
    t.equal(res.statusCode, 200)
    t.equal(res.json().data.domain, 'm1')
    t.equal((await check(ta, 'obj=payouts&act=read', ta.tokenFor(w.m2Clerk))).allowed, false)
    const listing = await ta.call({ method: 'GET', url: '/v2/admin/permissions/roles/clerk?domain=m2', token: owner })
    t.equal(listing.json().data.domain, 'm1')
    t.ok(listing.json().data.permissions.some((p: { obj: string; domain: string }) => p.obj === 'payouts' && p.domain === 'm1'))
    const user = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${w.m1Clerk.id}?domain=m2`, token: owner })
    t.equal(user.json().data.domain, 'm1')
  })

  t.test('users outside the tenant are answered 404, like unknown ids', async (t) => {
    const w = await world(t)
    const { ta } = w
    const owner = ta.tokenFor(w.m1Owner)
    for (const target of [w.m2Clerk.id, w.staff.id, ta.root.id, '00000000-0000-4000-8000-000000000000']) {
      const res = await userCommand(ta, 'grant', target, { obj: 'orders', act: 'read' }, owner)
      t.equal(res.statusCode, 404, `grant to ${target}`)
      t.equal(res.json().response_code, '401')
      const read = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${target}`, token: owner })
      t.equal(read.statusCode, 404)
      const asked = await check(ta, `obj=orders&act=read&user_id=${target}`, owner)
      t.equal(asked.status, 404)
    }
  })

  t.test('only active catalog pairs can be granted, denied or revoked', async (t) => {
    const w = await world(t)
    const { ta } = w
    for (const res of [
      await grantRole(ta, 'clerk', { obj: 'rockets', act: 'launch' }),
      await revokeRole(ta, 'clerk', { obj: 'rockets', act: 'launch' }),
      await userCommand(ta, 'grant', w.m1Clerk.id, { obj: 'rockets', act: 'launch' }),
      await userCommand(ta, 'deny', w.m1Clerk.id, { obj: 'rockets', act: 'launch' }),
      await userCommand(ta, 'revoke', w.m1Clerk.id, { obj: 'rockets', act: 'launch' }),
    ]) {
      t.equal(res.statusCode, 400)
      t.equal(res.json().response_code, '104')
    }
    t.equal((await check(ta, 'obj=rockets&act=launch')).allowed, false, 'a pair outside the catalog answers false, not an error')
  })

  t.test('root sub-roles and root users cannot receive grants', async (t) => {
    const w = await world(t)
    const { ta } = w
    const res = await grantRole(ta, 'super_admin', { obj: 'orders', act: 'read' })
    t.equal(res.statusCode, 400)
    t.equal(res.json().response_code, '105')
    const toOwner = await userCommand(ta, 'deny', w.m1Owner.id, { obj: 'orders', act: 'read' })
    t.equal(toOwner.statusCode, 400)
    t.equal(toOwner.json().response_code, '105')
  })

  t.test("a merchant user's overrides live only in its merchant", async (t) => {
    const w = await world(t)
    const { ta } = w
    for (const domain of ['m2', 'global']) {
      const res = await userCommand(ta, 'grant', w.m1Clerk.id, { obj: 'orders', act: 'read', domain })
      t.equal(res.statusCode, 400)
      t.equal(res.json().response_code, '106')
    }
    const home = await userCommand(ta, 'grant', w.m1Clerk.id, { obj: 'orders', act: 'read' })
    t.equal(home.statusCode, 200)
    t.equal(home.json().data.domain, 'm1', 'user commands default to the home domain')
    const staffIn = await userCommand(ta, 'grant', w.staff.id, { obj: 'customers', act: 'read', domain: 'm2' })
    t.equal(staffIn.json().data.domain, 'm2')
    t.equal((await check(ta, 'obj=customers&act=read&domain=m2', ta.tokenFor(w.staff))).allowed, true)
    t.equal((await check(ta, 'obj=customers&act=read&domain=m1', ta.tokenFor(w.staff))).allowed, false)
    const staffDefault = await userCommand(ta, 'grant', w.staff.id, { obj: 'customers', act: 'export' })
    t.equal(staffDefault.json().data.domain, 'global')
    t.equal((await check(ta, 'obj=customers&act=export&domain=m1', ta.tokenFor(w.staff))).allowed, true, 'global overrides reach every domain')
  })

  t.test('deny beats every allow; revoke removes only the override', async (t) => {
    const w = await world(t)
    const { ta } = w
    await grantRole(ta, 'support', { obj: 'payouts', act: 'read' })
    await userCommand(ta, 'grant', w.staff.id, { obj: 'payouts', act: 'read' })
    await userCommand(ta, 'deny', w.staff.id, { obj: 'payouts', act: 'read', domain: 'm1' })
    t.equal((await check(ta, 'obj=payouts&act=read&domain=m1', ta.tokenFor(w.staff))).allowed, false)
    t.equal((await check(ta, 'obj=payouts&act=read&domain=m2', ta.tokenFor(w.staff))).allowed, true)
    const listing = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${w.staff.id}?domain=m1` })
    t.notOk(listing.json().data.permissions.some((p: { obj: string; act: string }) => p.obj === 'payouts' && p.act === 'read'), 'denied pairs are excluded')
    const revoked = await userCommand(ta, 'revoke', w.staff.id, { obj: 'payouts', act: 'read', domain: 'm1' })
    t.equal(revoked.json().data.changed, true)
    t.equal((await check(ta, 'obj=payouts&act=read&domain=m1', ta.tokenFor(w.staff))).allowed, true)
    const again = await userCommand(ta, 'revoke', w.staff.id, { obj: 'payouts', act: 'read', domain: 'm1' })
    t.equal(again.json().data.changed, false)
    await userCommand(ta, 'revoke', w.staff.id, { obj: 'payouts', act: 'read' })
    t.equal((await check(ta, 'obj=payouts&act=read&domain=m1', ta.tokenFor(w.staff))).allowed, true, 'the role grant stays')
    const list = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${w.staff.id}?domain=m1` })
    t.match(list.json().data.permissions.find((p: { obj: string; act: string }) => p.obj === 'payouts' && p.act === 'read'), { source: 'role', domain: 'global' })
  })

  t.test('no privilege escalation: a non-root caller hands out only what it holds', async (t) => {
    const w = await world(t)
    const { ta } = w
    // The m1 owner lets a manager assign, and the manager holds orders:read only.
    const owner = ta.tokenFor(w.m1Owner)
    const manager = await register(ta, { email: 'manager@m1.example', sub_role_code: 'manager' }, owner)
    await grantRole(ta, 'manager', { obj: 'permission', act: 'assign' }, owner)
    await grantRole(ta, 'manager', { obj: 'permission', act: 'read' }, owner)
    await grantRole(ta, 'manager', { obj: 'orders', act: 'refund' }, owner)
    const token = ta.tokenFor(manager)
    const ok = await userCommand(ta, 'grant', w.m1Clerk.id, { obj: 'orders', act: 'refund' }, token)
    t.equal(ok.statusCode, 200)
    const escalate = await userCommand(ta, 'grant', w.m1Clerk.id, { obj: 'payouts', act: 'approve' }, token)
    t.equal(escalate.statusCode, 403)
    t.equal(escalate.json().response_code, '302')
    const escalateRole = await grantRole(ta, 'clerk', { obj: 'payouts', act: 'approve' }, token)
    t.equal(escalateRole.statusCode, 403)
    const denyOk = await userCommand(ta, 'deny', w.m1Clerk.id, { obj: 'orders', act: 'refund' }, token)
    t.equal(denyOk.statusCode, 200)
    const denyEscalate = await userCommand(ta, 'deny', w.m1Clerk.id, { obj: 'customers', act: 'export' }, token)
    t.equal(denyEscalate.statusCode, 403)
    // Without permission:revoke the guard refuses before any rule runs.
    const revoke = await userCommand(ta, 'revoke', w.m1Clerk.id, { obj: 'orders', act: 'refund' }, token)
    t.equal(revoke.statusCode, 403)
    t.equal(revoke.json().response_code, '300')
    // Granted permission:read through Casbin opens the read endpoints.
    const read = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${w.m1Clerk.id}`, token })
    t.equal(read.statusCode, 200)
    const catalog = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog', token: ta.tokenFor(w.m1Clerk) })
    t.equal(catalog.statusCode, 403, 'a clerk without permission:read is refused')
  })

  t.test('no privilege escalation through registration either', async (t) => {
    const w = await world(t)
    const { ta } = w
    const owner = ta.tokenFor(w.m1Owner)
    const hr = await register(ta, { email: 'hr@m1.example', sub_role_code: 'hr' }, owner)
    await grantRole(ta, 'hr', { obj: 'admin', act: 'register' }, owner)
    await grantRole(ta, 'hr', { obj: 'customers', act: 'read' }, owner)
    await grantRole(ta, 'approver', { obj: 'payouts', act: 'approve' }, owner)
    await grantRole(ta, 'reader', { obj: 'customers', act: 'read' }, owner)
    const token = ta.tokenFor(hr)
    const reg = (email: string, role: string) =>
      ta.call({ method: 'POST', url: '/v2/admin/register', token, body: { command: 'register-admin', data: { email, password: 'long-enough-1', name: 'N', sub_role_code: role } } })
    const escalating = await reg('approver@m1.example', 'approver')
    t.equal(escalating.statusCode, 403, 'a sub-role holding what the caller lacks')
    t.equal(escalating.json().response_code, '302')
    t.equal((await reg('reader@m1.example', 'reader')).statusCode, 201, 'a sub-role within the caller’s own permissions')
    t.equal((await reg('fresh@m1.example', 'brand_new_role')).statusCode, 201, 'a sub-role with no grants yet')
    t.equal((await reg('peer@m1.example', 'hr')).statusCode, 201, 'its own sub-role')
    const byOwner = await ta.call({
      method: 'POST',
      url: '/v2/admin/register',
      token: owner,
      body: { command: 'register-admin', data: { email: 'approver2@m1.example', password: 'long-enough-1', name: 'N', sub_role_code: 'approver' } },
    })
    t.equal(byOwner.statusCode, 201, 'root callers may assign any sub-role')
  })

  t.test('check: own answers with any token; others need permission:read', async (t) => {
    const w = await world(t)
    const { ta } = w
    await userCommand(ta, 'grant', w.m1Clerk.id, { obj: 'orders', act: 'read' })
    const clerk = ta.tokenFor(w.m2Clerk)
    t.equal((await check(ta, 'obj=orders&act=read', clerk)).status, 200)
    const other = await check(ta, `obj=orders&act=read&user_id=${w.m1Clerk.id}`, clerk)
    t.equal(other.status, 403)
    const byRoot = await check(ta, `obj=orders&act=read&user_id=${w.m1Clerk.id}`)
    t.equal(byRoot.allowed, true)
    t.equal((await check(ta, `obj=orders&act=read&user_id=${w.m1Clerk.id}&domain=m2`)).allowed, false, 'a domain where the subject holds nothing answers false')
    for (const bad of ['obj=a*&act=read', 'obj=a,b&act=read', 'obj=orders&act=re%00ad', 'obj=orders&act=read&domain=m%201', 'obj=orders', 'obj=orders&act=read&user_id=nope']) {
      const res = await check(ta, bad)
      t.equal(res.status, 400, bad)
      t.equal(res.body.response_code, '100')
    }
  })

  t.test('check-batch answers in request order with resolved domains', async (t) => {
    const w = await world(t)
    const { ta } = w
    await grantRole(ta, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    const res = await ta.call({
      method: 'POST',
      url: '/v2/authz/check-batch',
      token: ta.tokenFor(w.m1Clerk),
      body: {
        command: 'check-batch',
        data: { checks: [{ obj: 'orders', act: 'cancel' }, { obj: 'orders', act: 'read', domain: 'm2' }, { obj: 'nope', act: 'nope' }] },
      },
    })
    t.equal(res.statusCode, 200)
    t.same(res.json().data.results, [
      { obj: 'orders', act: 'cancel', domain: 'm1', allowed: true },
      { obj: 'orders', act: 'read', domain: 'm2', allowed: false },
      { obj: 'nope', act: 'nope', domain: 'm1', allowed: false },
    ])
    const none = await ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: { command: 'check-batch', data: { checks: [] } } })
    t.equal(none.statusCode, 400)
    const many = Array.from({ length: 101 }, () => ({ obj: 'orders', act: 'read' }))
    const tooMany = await ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: { command: 'check-batch', data: { checks: many } } })
    t.equal(tooMany.statusCode, 400)
    const hundred = await ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: { command: 'check-batch', data: { checks: many.slice(1) } } })
    t.equal(hundred.json().data.results.length, 100)
  })

  t.test('bad identifiers are a 400, never a 500 or a match elsewhere', async (t) => {
    const w = await world(t)
    const { ta } = w
    const cases: Array<[string, Record<string, unknown>]> = [
      ['clerk', { obj: '*', act: 'read' }],
      ['clerk', { obj: 'orders', act: 'read', domain: '*' }],
      ['clerk', { obj: 'orders', act: 'read,write' }],
      ['clerk', { obj: 'orders\u0000', act: 'read' }],
      ['clerk', { obj: 'orders', act: 'read', domain: 'm1, m2' }],
      ['clerk', { obj: 'x'.repeat(65), act: 'read' }],
      ['Clerk%20X', { obj: 'orders', act: 'read' }],
      ['a%2Cb', { obj: 'orders', act: 'read' }],
    ]
    for (const [role, data] of cases) {
      const res = await grantRole(ta, role, data)
      t.equal(res.statusCode, 400, `${role} ${JSON.stringify(data)}`)
      t.notMatch(res.body, /at \w+ \(|SELECT|INSERT/)
    }
    const badUser = await userCommand(ta, 'grant', 'not-a-uuid', { obj: 'orders', act: 'read' })
    t.equal(badUser.statusCode, 400)
  })

  t.test('catalog and role listing shapes', async (t) => {
    const w = await world(t)
    const { ta } = w
    // A clerk role with a global grant and one in m1.
    await grantRole(ta, 'clerk', { obj: 'products', act: 'read' })
    await grantRole(ta, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    const catalog = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog' })
    t.equal(catalog.statusCode, 200)
    const items = catalog.json().data.items as Array<Record<string, unknown>>
    t.ok(items.length >= 16)
    t.same(Object.keys(items[0] ?? {}).sort(), ['act', 'group_name', 'is_active', 'label', 'obj', 'scope'])
    t.ok(items.some((i) => i.obj === 'admin' && i.act === 'register' && i.is_active === true))
    const role = await ta.call({ method: 'GET', url: '/v2/admin/permissions/roles/clerk?domain=m1' })
    t.same(Object.keys(role.json().data).sort(), ['denied', 'domain', 'is_root', 'permissions', 'sub_role_code'])
    t.ok(role.json().data.permissions.some((p: { domain: string }) => p.domain === 'global'), 'global grants are listed with their domain')
    t.ok(role.json().data.permissions.some((p: { domain: string }) => p.domain === 'm1'))
    const profile = await ta.call({ method: 'GET', url: '/v2/profile/permissions', token: ta.tokenFor(w.m1Clerk) })
    t.same(Object.keys(profile.json().data).sort(), ['domain', 'is_root', 'permissions', 'sub_role_code', 'user_id'])
    t.same(Object.keys(profile.json().data.permissions[0]).sort(), ['act', 'domain', 'expires_at', 'group_name', 'label', 'obj', 'source'])
    const rootProfile = await ta.call({ method: 'GET', url: '/v2/profile/permissions' })
    t.equal(rootProfile.json().data.is_root, true)
    t.equal(rootProfile.json().data.permissions.length, items.filter((i) => i.is_active).length)
  })
})
