/**
 * Holes a black-box probe found, each kept shut: a deny lifted by the admin
 * it restricts, NUL and format characters reaching the database, ids and
 * domains read differently per endpoint, and staff addresses shown to
 * merchants. Every case on both databases.
 */
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { buildTestApp, onboard, register, type TestApp } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('security headers and request hardening')

function expectError(t: Test, res: LightMyRequestResponse, status: number, code: string, field?: string): void {
  t.equal(res.statusCode, status, `status ${status}: ${res.body}`)
  const body = res.json() as { response_code?: string; errors?: Array<{ field: string }> }
  t.equal(body.response_code, code, `response_code ${code}`)
  t.same(errorShapeProblems(res), [], 'an envelope')
  if (field !== undefined) t.ok(body.errors?.some((e) => e.field === field), `names ${field}`)
}

const pair = (command: string, obj: string, act: string, domain?: string) => ({
  command,
  data: { obj, act, ...(domain !== undefined ? { domain } : {}) },
})

async function rows(ta: TestApp, sql: string, params: unknown[] = []): Promise<unknown[]> {
  return (await ta.service.db.query(sql, params)).rows
}

t.test('revokes need the pair too: nobody lifts a deny meant for them or anyone else', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const ownerToken = ta.tokenFor(owner)
  const sub = await register(ta, { email: 'sub@m1.example', sub_role_code: 'supervisor', merchant_id: 'm1' }, ownerToken)
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ownerToken)
  const call = (token: string, method: 'POST' | 'DELETE', url: string, body: unknown) => ta.call({ method, url, token, body })

  // The supervisor may grant and revoke, and reads orders, but the owner denies it orders:read and orders:refund.
  for (const [obj, act] of [
    ['permission', 'revoke'],
    ['permission', 'assign'],
    ['permission', 'read'],
    ['orders', 'read'],
  ] as const) {
    t.equal((await call(ownerToken, 'POST', '/v2/admin/permissions/roles/supervisor/grant', pair('grant-role-permission', obj, act))).statusCode, 200)
  }
  t.equal((await call(ownerToken, 'POST', `/v2/admin/permissions/users/${sub.id}/deny`, pair('deny-user-permission', 'orders', 'read'))).statusCode, 200)
  t.equal((await call(ownerToken, 'POST', '/v2/admin/permissions/roles/clerk/grant', pair('grant-role-permission', 'orders', 'refund'))).statusCode, 200)
  t.equal((await call(ownerToken, 'POST', `/v2/admin/permissions/users/${clerk.id}/deny`, pair('deny-user-permission', 'orders', 'refund'))).statusCode, 200)

  const subToken = ta.tokenFor(sub)
  const audit = await rows(ta, 'SELECT id FROM permission_audit')
  expectError(t, await call(subToken, 'DELETE', `/v2/admin/permissions/users/${sub.id}/revoke`, pair('revoke-user-permission', 'orders', 'read')), 403, '302')
  const check = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read', token: subToken })
  t.same((check.json() as { data: unknown }).data, { allowed: false }, "the supervisor's own deny still holds")
  expectError(t, await call(subToken, 'DELETE', `/v2/admin/permissions/users/${clerk.id}/revoke`, pair('revoke-user-permission', 'orders', 'refund')), 403, '302')
  expectError(t, await call(subToken, 'DELETE', '/v2/admin/permissions/roles/clerk/revoke', pair('revoke-role-permission', 'orders', 'refund')), 403, '302')
  t.same(await rows(ta, 'SELECT id FROM permission_audit'), audit, 'nothing was written or audited')

  // What the caller holds, it may revoke; a root caller may revoke anything.
  t.equal((await call(ownerToken, 'POST', '/v2/admin/permissions/roles/clerk/grant', pair('grant-role-permission', 'customers', 'read'))).statusCode, 200)
  t.equal((await call(ownerToken, 'POST', '/v2/admin/permissions/roles/supervisor/grant', pair('grant-role-permission', 'customers', 'read'))).statusCode, 200)
  t.equal((await call(subToken, 'DELETE', '/v2/admin/permissions/roles/clerk/revoke', pair('revoke-role-permission', 'customers', 'read'))).statusCode, 200)
  t.equal((await call(ownerToken, 'DELETE', `/v2/admin/permissions/users/${clerk.id}/revoke`, pair('revoke-user-permission', 'orders', 'refund'))).statusCode, 200)
})

t.test('NUL, control and format characters are 400 naming the field, never 500', async (t) => {
  const ta = await buildTestApp(t)
  await onboard(ta, 'm1')
  for (const query of ['target_id=%00', 'action=a%00b', 'target_id=a%E2%80%AEb', 'lang=%00']) {
    const res = await ta.call({ method: 'GET', url: `/v2/admin/permissions/audit-log?${query}` })
    expectError(t, res, 400, '100', query.split('=')[0])
  }
  for (const name of ['a\u0000b', 'Ana\u202eoiraM', 'zero\u200bwidth', '\ud800', 'tab\there']) {
    const registered = await ta.call({
      method: 'POST',
      url: '/v2/admin/register',
      body: { command: 'register-admin', data: { email: `x${name.length}@example.com`, password: 'admin-pass-123', name, sub_role_code: 'clerk' } },
    })
    expectError(t, registered, 400, '100', 'name')
    const onboarded = await ta.call({
      method: 'POST',
      url: '/v2/admin/merchants',
      body: { command: 'onboard-merchant', data: { merchant_id: 'm9', email: 'o@m9.example', password: 'merchant-pass-1', name } },
    })
    expectError(t, onboarded, 400, '100', 'name')
  }
  t.same(await rows(ta, "SELECT id FROM merchants WHERE id = 'm9'"), [], 'nothing stored')
  const fine = await register(ta, { email: 'maria@example.com', sub_role_code: 'clerk', name: 'María José Ñúñez-O’Brien 李' })
  t.equal(fine.name, 'María José Ñúñez-O’Brien 李', 'ordinary names of every script are fine')
})

t.test('one reading of ids and domains on every endpoint', async (t) => {
  const ta = await buildTestApp(t)
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const upper = clerk.id.toUpperCase()
  const lowerCheck = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  const upperCheck = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${upper}` })
  t.equal(upperCheck.statusCode, 200, 'the check reads an upper-case id as the same user')
  t.same(upperCheck.json(), lowerCheck.json())
  const listing = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${upper}` })
  t.equal(listing.statusCode, 200)
  t.equal((listing.json() as { data: { user_id: string } }).data.user_id, clerk.id, 'answered with the canonical id')
  const override = await ta.call({ method: 'POST', url: `/v2/admin/permissions/users/${upper}/grant`, body: pair('grant-user-permission', 'orders', 'read') })
  t.equal(override.statusCode, 200)
  t.equal((override.json() as { data: { user_id: string } }).data.user_id, clerk.id)

  for (const url of [
    `/v2/admin/permissions/users/${clerk.id}?domain=nope`,
    '/v2/profile/permissions?domain=nope',
    '/v2/admin/permissions/roles/clerk?domain=nope',
  ]) {
    expectError(t, await ta.call({ method: 'GET', url }), 404, '402')
  }
  expectError(t, await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: pair('grant-role-permission', 'orders', 'read', 'nope') }), 404, '402')
})

t.test('merchant callers see who acted, not where platform staff work from', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const staffGrant = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    body: pair('grant-role-permission', 'orders', 'read', 'm1'),
    remoteAddress: '10.1.2.3',
  })
  t.equal(staffGrant.statusCode, 200)
  const ownGrant = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    token: ta.tokenFor(owner),
    body: pair('grant-role-permission', 'orders', 'refund'),
    remoteAddress: '192.0.2.7',
  })
  t.equal(ownGrant.statusCode, 200)
  type Entry = { actor_type: string; ip: string | null; act: string | null }
  const asMerchant = (await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log?target_id=clerk', token: ta.tokenFor(owner) })).json() as { data: { items: Entry[] } }
  const staff = asMerchant.data.items.find((e) => e.act === 'read')
  const own = asMerchant.data.items.find((e) => e.act === 'refund')
  t.equal(staff?.actor_type, 'system_owner')
  t.equal(staff?.ip, null, "a staff member's address is not shown to the merchant")
  t.equal(own?.ip, '192.0.2.7', "the merchant's own admins' addresses are")
  const asStaff = (await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log?target_id=clerk' })).json() as { data: { items: Entry[] } }
  t.equal(asStaff.data.items.find((e) => e.act === 'read')?.ip, '10.1.2.3', 'platform staff see every address')
})
