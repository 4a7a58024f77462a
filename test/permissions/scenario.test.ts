import t from 'tap'
import { buildTestApp, onboard, register } from '../helper.js'

t.test('grant to a merchant sub-role, check, deny override, revoke', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  await onboard(ta, 'm2')
  const ownerToken = ta.tokenFor(owner)
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ownerToken)
  const clerkToken = ta.tokenFor(clerk)
  const check = async (query: string, token = clerkToken) => {
    const res = await ta.call({ method: 'GET', url: `/v2/authz/check?${query}`, token })
    t.equal(res.statusCode, 200, res.body)
    return (res.json() as { data: { allowed: boolean } }).data.allowed
  }
  t.equal(await check('obj=orders&act=refund'), false)

  const grant = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    token: ownerToken,
    body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund', domain: 'm2' } },
  })
  t.equal(grant.statusCode, 200, grant.body)
  t.match(grant.json().data, { changed: true, sub_role_code: 'clerk', obj: 'orders', act: 'refund', domain: 'm1' })
  const again = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    token: ownerToken,
    body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund' } },
  })
  t.equal(again.json().data.changed, false)
  t.equal(again.json().data.revision, grant.json().data.revision)

  t.equal(await check('obj=orders&act=refund'), true)
  t.equal(await check('obj=orders&act=refund&domain=m2'), false)
  t.equal(await check('obj=orders&act=refund&domain=global'), false)

  const deny = await ta.call({
    method: 'POST',
    url: `/v2/admin/permissions/users/${clerk.id}/deny`,
    token: ownerToken,
    body: { command: 'deny-user-permission', data: { obj: 'orders', act: 'refund' } },
  })
  t.equal(deny.statusCode, 200, deny.body)
  t.equal(await check('obj=orders&act=refund'), false)

  const perms = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${clerk.id}`, token: ownerToken })
  t.equal(perms.statusCode, 200, perms.body)
  t.same(perms.json().data.permissions, [])

  const revoke = await ta.call({
    method: 'DELETE',
    url: `/v2/admin/permissions/users/${clerk.id}/revoke`,
    token: ownerToken,
    body: { command: 'revoke-user-permission', data: { obj: 'orders', act: 'refund' } },
  })
  t.equal(revoke.statusCode, 200, revoke.body)
  t.equal(await check('obj=orders&act=refund'), true)
  const mine = await ta.call({ method: 'GET', url: '/v2/profile/permissions', token: clerkToken })
  t.match(mine.json().data.permissions, [{ obj: 'orders', act: 'refund', domain: 'm1', source: 'role' }])

  const role = await ta.call({ method: 'GET', url: '/v2/admin/permissions/roles/clerk', token: ownerToken })
  t.match(role.json().data, { sub_role_code: 'clerk', domain: 'm1', is_root: false, permissions: [{ obj: 'orders', act: 'refund', domain: 'm1' }] })
  const rootRole = await ta.call({ method: 'GET', url: '/v2/admin/permissions/roles/super_admin' })
  t.equal(rootRole.json().data.is_root, true)
  t.ok(rootRole.json().data.permissions.length >= 10)
})
