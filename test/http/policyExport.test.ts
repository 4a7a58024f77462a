/**
 * GET /v2/admin/permissions/export: the policy as Casbin CSV, the bytes of
 * `policy export`, for system-owner super_admins only.
 */
import t from 'tap'
import { grantRolePermission } from '../../src/commands/changeRolePermission.js'
import { exportPolicy } from '../../src/commands/exportPolicy.js'
import { backend, buildTestApp, onboard, register } from '../helper.js'

t.test(`the export route (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const { service } = ta
  const owner = await onboard(ta, 'm-1')
  await onboard(ta, 'm-2')
  const clerk = await register(ta, { email: 'clerk@m-1.example', sub_role_code: 'clerk', merchant_id: 'm-1' })
  const viewer = await register(ta, { email: 'viewer@platform.example', sub_role_code: 'viewer' })
  const nobody = await register(ta, { email: 'nobody@platform.example', sub_role_code: 'nobody' })
  const root = { account: ta.root, ip: null }
  await grantRolePermission(service, root, 'viewer', { obj: 'permission', act: 'read', domain: 'global' })
  await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm-1' })
  await grantRolePermission(service, root, 'clerk', { obj: 'permission', act: 'read', domain: 'm-1' })
  await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'refund', domain: 'm-2' })

  const get = (url: string, token = ta.rootToken) => ta.call({ method: 'GET', url, token })

  const whole = await get('/v2/admin/permissions/export')
  t.equal(whole.statusCode, 200)
  t.equal(whole.headers['content-type'], 'text/csv; charset=utf-8')
  t.equal(whole.headers['content-disposition'], 'attachment; filename="policy.csv"')
  t.equal(whole.body, (await exportPolicy(service)).csv, 'the bytes of policy export')
  t.ok(whole.body.startsWith('# policy-format: 1\n# scope: all\np, '), 'the header naming the scope, as policy export writes it')
  t.ok(whole.body.includes(`g, ${clerk.id}, clerk, m-1\n`))
  t.ok(whole.body.includes('p, clerk, m-2, orders, refund, allow\n'))
  t.ok(whole.headers['x-policy-revision'] !== undefined, 'with the revision header every answer carries')

  const m1 = await get('/v2/admin/permissions/export?domain=m-1&min_revision=0')
  t.equal(m1.statusCode, 200)
  t.equal(m1.headers['content-disposition'], 'attachment; filename="policy-m-1.csv"')
  t.equal(m1.body, (await exportPolicy(service, { domain: 'm-1' })).csv)
  t.notOk(m1.body.includes('m-2'), "no other merchant's rows")
  t.ok(m1.body.startsWith('# policy-format: 1\n# scope: domain m-1\np, '), 'the header naming the domain')

  const refusals: Array<[string, string, string | null, number, string]> = [
    ['an unknown domain', '/v2/admin/permissions/export?domain=m-404', ta.rootToken, 404, '402'],
    ['a domain that cannot be one', '/v2/admin/permissions/export?domain=a%2Cb', ta.rootToken, 400, '100'],
    ["a merchant's super_admin", '/v2/admin/permissions/export?domain=m-1', ta.tokenFor(owner), 403, '301'],
    ['a merchant user holding permission:read', '/v2/admin/permissions/export', ta.tokenFor(clerk), 403, '301'],
    ['a system owner holding permission:read, not root', '/v2/admin/permissions/export', ta.tokenFor(viewer), 403, '300'],
    ['a system owner without permission:read', '/v2/admin/permissions/export', ta.tokenFor(nobody), 403, '300'],
    ['no token', '/v2/admin/permissions/export', null, 401, '200'],
  ]
  for (const [name, url, token, status, code] of refusals) {
    const res = await ta.call({ method: 'GET', url, token })
    t.equal(res.statusCode, status, name)
    t.match(res.headers['content-type'], /^application\/json/, `${name}: the usual envelope`)
    t.match(res.json(), { response_code: code, response_text: String }, `${name}: ${res.body}`)
  }
  const denied = await get('/v2/admin/permissions/export', ta.tokenFor(viewer))
  t.equal(denied.json().response_text, 'You do not have the permission super_admin.')
  const spanish = await get('/v2/admin/permissions/export?lang=es', ta.tokenFor(viewer))
  t.equal(spanish.json().response_text, 'No tiene el permiso super_admin.')

  const spec = (await ta.call({ method: 'GET', url: '/docs/json', token: null })).json() as {
    paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>
  }
  const operation = spec.paths['/v2/admin/permissions/export']?.get
  t.ok(operation?.responses['200']?.content?.['text/csv'] !== undefined, 'documented as text/csv')
  t.ok(operation?.responses['403'] !== undefined, 'with its refusals')
})
