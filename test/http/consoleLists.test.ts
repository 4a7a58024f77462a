import t from 'tap'
import type { Static } from '@sinclair/typebox'
import type { SubRoleItem as SubRoleItemSchema } from '../../src/http/routes/subRoles.js'
import { readFileSync } from 'node:fs'
import { declaredCatalog } from '../../src/domain/permissions.js'
import { readChangesAfter } from '../../src/storage/changes.js'
import { buildTestApp, onboard, register } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'

/** The lists the admin console reads, explicit sub-roles and localised catalog labels. */

type SubRoleItem = Static<typeof SubRoleItemSchema>

t.test('list-sub-roles and create-sub-role', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'shop-1')
  await onboard(ta, 'shop-2')
  const ownerToken = ta.tokenFor(owner)
  const create = (data: Record<string, unknown>, token = ta.rootToken) =>
    ta.call({ method: 'POST', url: '/v2/admin/sub-roles', token, body: { command: 'create-sub-role', data } })
  const list = async (query: string, token = ta.rootToken) => {
    const res = await ta.call({ method: 'GET', url: `/v2/admin/sub-roles${query}`, token })
    t.equal(res.statusCode, 200, `GET /v2/admin/sub-roles${query}`)
    return res.json().data as { items: SubRoleItem[]; page: number; page_size: number; total: number }
  }

  const created = await create({ code: 'support_agent', label: 'Support agent' })
  t.equal(created.statusCode, 201, 'create-sub-role answers 201')
  t.match(created.json().data, { code: 'support_agent', label: 'Support agent', domain: 'global', is_root: false })
  t.type(created.json().data.revision, 'number')
  const audit = await ta.service.db.query('SELECT action, target_type, target_id, domain, actor_id FROM permission_audit WHERE action = $1', ['sub_role_created'])
  t.same(audit.rows, [{ action: 'sub_role_created', target_type: 'role', target_id: 'support_agent', domain: 'global', actor_id: ta.root.id }], 'audited as sub_role_created')
  const changes = await readChangesAfter(ta.service.db, created.json().data.revision - 1)
  t.same(changes[0]?.changes, [{ kind: 'sub_role', code: 'support_agent', domain: 'global', label: 'Support agent', is_root: false }], 'other replicas learn it, with its domain, from the change feed')

  const again = await create({ code: 'support_agent', label: 'Other' })
  t.equal(again.statusCode, 409, 'the same code twice')
  t.equal(again.json().response_code, '503')
  t.same(errorShapeProblems(again), [])
  const root = await create({ code: 'super_admin', label: 'Root' })
  t.equal(root.statusCode, 400, 'super_admin is refused')
  t.same(root.json().errors?.map((e: { field: string }) => e.field), ['code'])
  for (const code of ['A', 'x', '1abc', 'has space', 'Upper']) {
    const res = await create({ code, label: 'x' })
    t.equal(res.json().response_code, '100', `code ${JSON.stringify(code)} is refused`)
  }

  // A clerk in shop-1, a grant in shop-1 and one in global, a deactivated clerk.
  await register(ta, { email: 'clerk@shop-1.example', sub_role_code: 'clerk', merchant_id: 'shop-1' })
  const gone = await register(ta, { email: 'gone@shop-1.example', sub_role_code: 'clerk', merchant_id: 'shop-1' })
  await ta.call({ method: 'POST', url: `/v2/admin/accounts/${gone.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })
  await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'shop-1' } } })
  await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/auditor/grant', body: { command: 'grant-role-permission', data: { obj: 'reports', act: 'read' } } })
  await register(ta, { email: 'packer@shop-2.example', sub_role_code: 'packer', merchant_id: 'shop-2' })

  const shop1 = await list('?domain=shop-1')
  t.same(
    shop1.items,
    [
      { code: 'auditor', label: null, is_root: false, members: 0, rules: 0 },
      { code: 'clerk', label: null, is_root: false, members: 1, rules: 1 },
      { code: 'super_admin', label: null, is_root: true, members: 1, rules: 0 },
      { code: 'support_agent', label: 'Support agent', is_root: false, members: 0, rules: 0 },
    ],
    "shop-1: its holders' sub-roles, its grants' and global ones', created ones, root; members count active accounts only",
  )
  t.match(shop1, { page: 1, page_size: 20, total: 4 })
  t.notOk(shop1.items.some((i) => i.code === 'packer'), "another merchant's sub-role is not listed")

  const global = await list('')
  t.same(global.items.map((i) => i.code), ['auditor', 'super_admin', 'support_agent'], 'the domain defaults to global')
  t.same(global.items.find((i) => i.code === 'auditor'), { code: 'auditor', label: null, is_root: false, members: 0, rules: 1 })

  const paged = await list('?domain=shop-1&page=2&page_size=3')
  t.same(paged.items.map((i) => i.code), ['support_agent'], 'paging')
  t.match(paged, { page: 2, page_size: 3, total: 4 })

  t.test('merchant callers see their own merchant only', async (t) => {
    const forced = await list('?domain=shop-2', ownerToken)
    t.same(forced.items.map((i) => i.code), ['auditor', 'clerk', 'super_admin', 'support_agent'], 'shop-2 asked, shop-1 answered')
    const own = await create({ code: 'picker', label: 'Picker' }, ownerToken)
    t.equal(own.statusCode, 201, 'a merchant super_admin creates a sub-role')
    t.ok((await list('', ownerToken)).items.some((i) => i.code === 'picker'), 'listed in its merchant')
    t.notOk((await list('?domain=shop-2')).items.some((i) => i.code === 'picker'), 'not in another merchant')
    t.notOk((await list('')).items.some((i) => i.code === 'picker'), 'nor in global')
  })

  t.test('with the default, sub-roles are still created on first use', async (t) => {
    const res = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/fresh_role/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read' } } })
    t.equal(res.statusCode, 200)
    const { rows } = await ta.service.db.query('SELECT code FROM sub_roles WHERE code = $1', ['fresh_role'])
    t.equal(rows.length, 1)
  })

  t.test('refusals', async (t) => {
    const unknown = await ta.call({ method: 'GET', url: '/v2/admin/sub-roles?domain=nowhere' })
    t.equal(unknown.json().response_code, '402', 'a domain that names no merchant')
    const clerk = await register(ta, { email: 'clerk2@shop-1.example', sub_role_code: 'clerk', merchant_id: 'shop-1' })
    const denied = await create({ code: 'nope', label: 'x' }, ta.tokenFor(clerk))
    t.equal(denied.statusCode, 403, 'create-sub-role needs permission:assign')
    const noRead = await ta.call({ method: 'GET', url: '/v2/admin/sub-roles', token: ta.tokenFor(clerk) })
    t.equal(noRead.statusCode, 403, 'the list needs permission:read')
  })
})

t.test('SUB_ROLES_EXPLICIT=true refuses sub-roles never created', async (t) => {
  const ta = await buildTestApp(t, { env: { SUB_ROLES_EXPLICIT: 'true' } })
  await onboard(ta, 'shop-1')
  const grant = (role: string) =>
    ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read' } } })
  const registration = (role: string, email: string) =>
    ta.call({
      method: 'POST',
      url: '/v2/admin/register',
      body: { command: 'register-admin', data: { email, password: 'admin-pass-123', name: 'A', sub_role_code: role, merchant_id: 'shop-1' } },
    })
  const before = await ta.service.db.query('SELECT count(*)::int AS n FROM sub_roles')

  const typo = await grant('support_agentclerk')
  t.equal(typo.statusCode, 404, 'a grant to a sub-role never created')
  t.equal(typo.json().response_code, '403')
  t.match(typo.json().response_text, /support_agentclerk/, 'the answer names the code')
  t.same(errorShapeProblems(typo), [])
  const es = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/typo_role/grant?lang=es', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read' } } })
  t.match(es.json().response_text, /El subrol typo_role no existe/, 'localised')
  const reg = await registration('clerk', 'clerk@shop-1.example')
  t.equal(reg.json().response_code, '403', 'a registration naming it')
  const after = await ta.service.db.query('SELECT count(*)::int AS n FROM sub_roles')
  t.same(after.rows, before.rows, 'nothing was created')

  const made = await ta.call({ method: 'POST', url: '/v2/admin/sub-roles', body: { command: 'create-sub-role', data: { code: 'clerk', label: 'Clerk' } } })
  t.equal(made.statusCode, 201)
  t.equal((await grant('clerk')).statusCode, 200, 'once created, grants work')
  const clerk = await registration('clerk', 'clerk@shop-1.example')
  t.equal(clerk.statusCode, 201, 'and registrations')
  const move = (role: string) =>
    ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk.json().data.id}/sub-role`, body: { command: 'change-sub-role', data: { sub_role_code: role } } })
  t.equal((await move('packer')).json().response_code, '403', 'a sub-role change naming one never created')
  t.equal((await move('clerk')).statusCode, 200, 'a created one')
})

t.test('list-merchants', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'shop_a1', 'owner@shop-a1.example')
  await onboard(ta, 'shopxa2')
  await onboard(ta, 'shop-b')
  await register(ta, { email: 'clerk@shop-b.example', sub_role_code: 'clerk', merchant_id: 'shop-b' })
  const list = async (query: string) => {
    const res = await ta.call({ method: 'GET', url: `/v2/admin/merchants${query}` })
    t.equal(res.statusCode, 200, query)
    return res.json().data as { items: Array<{ merchant_id: string; created_at: string; admins: number }>; total: number; page: number; page_size: number }
  }
  const all = await list('')
  t.same(all.items.map((m) => [m.merchant_id, m.admins]), [['shop-b', 2], ['shop_a1', 1], ['shopxa2', 1]], 'by id, with their accounts')
  t.match(all, { total: 3, page: 1, page_size: 20 })
  t.ok(all.items.every((m) => !Number.isNaN(Date.parse(m.created_at))), 'created_at is a date')
  t.same((await list('?q=shop_')).items.map((m) => m.merchant_id), ['shop_a1'], 'q is an id prefix, `_` a plain character')
  t.same((await list('?q=nothing')).items, [])
  const paged = await list('?page=2&page_size=2')
  t.same(paged.items.map((m) => m.merchant_id), ['shopxa2'])
  t.equal(paged.total, 3)

  t.test('display names: given at onboarding, the id when absent, found by part of the name', async (t) => {
    const onboardNamed = (data: Record<string, unknown>) =>
      ta.call({ method: 'POST', url: '/v2/admin/merchants', body: { command: 'onboard-merchant', data: { password: 'merchant-pass-1', name: 'Owner', ...data } } })
    const named = await onboardNamed({ merchant_id: 'acme-7', email: 'owner@acme-7.example', display_name: 'Acme Books & Co.' })
    t.equal(named.statusCode, 201, 'onboarded with a display name')
    for (const [name, value] of [
      ['empty', ''],
      ['longer than 120 characters', 'x'.repeat(121)],
      ['a control character', 'Acme\u0007'],
      ['a bidi override', 'Acme\u202e'],
    ] as const) {
      const refused = await onboardNamed({ merchant_id: 'bad-1', email: 'owner@bad-1.example', display_name: value })
      t.match({ status: refused.statusCode, code: refused.json().response_code, fields: refused.json().errors?.map((e: { field: string }) => e.field) }, { status: 400, code: '100', fields: ['display_name'] }, `${name} is refused`)
    }
    t.equal((await onboardNamed({ merchant_id: 'max-1', email: 'owner@max-1.example', display_name: 'y'.repeat(120) })).statusCode, 201, '120 characters are taken')
    const all = await list('?page_size=100')
    t.same(Object.keys(all.items[0] ?? {}).sort(), ['admins', 'created_at', 'display_name', 'merchant_id'], "a merchant's keys")
    const names = Object.fromEntries(all.items.map((m) => [m.merchant_id, (m as { display_name?: string }).display_name]))
    t.match(names, { 'acme-7': 'Acme Books & Co.', 'shop-b': 'shop-b', 'max-1': 'y'.repeat(120) }, 'onboarded without one, a merchant is named by its id')
    t.same((await list('?q=books')).items.map((m) => m.merchant_id), ['acme-7'], 'q finds part of the name, ignoring case')
    t.same((await list('?q=acme')).items.map((m) => m.merchant_id), ['acme-7'], 'and still an id prefix')
    t.same((await list('?q=me-7')).items, [], 'an id is matched by its start only (acme-7 is named otherwise)')
    t.same((await list('?q=%25')).items, [], '% in q is a plain character')
  })

  const verification = await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log/verification' })
  t.equal(verification.statusCode, 200, 'the audit chain verification')
  const { rows } = await ta.service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_audit')
  t.same(verification.json().data, { valid: true, rows: rows[0]?.n, read: rows[0]?.n, full: false, problem: null }, 'the first visit walks every audit row')
  t.equal((await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log/verification', token: ta.tokenFor(owner) })).statusCode, 403, 'platform staff only')

  const merchant = await ta.call({ method: 'GET', url: '/v2/admin/merchants', token: ta.tokenFor(owner) })
  t.equal(merchant.statusCode, 403, 'a merchant admin never gets the list')
  t.notMatch(merchant.body, /shop-b|shopxa2/)
  const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'viewer' })
  t.equal((await ta.call({ method: 'GET', url: '/v2/admin/merchants', token: ta.tokenFor(staff) })).statusCode, 403, 'system-owner staff without merchant:onboard')
})

t.test('catalog labels in the response locale', async (t) => {
  const ta = await buildTestApp(t)
  const catalog = async (lang: string) =>
    (await ta.call({ method: 'GET', url: `/v2/admin/permissions/catalog${lang}` })).json().data.items as Array<{ obj: string; act: string; label: string; group_name: string }>
  const en = await catalog('')
  const es = await catalog('?lang=es')
  const refund = (items: typeof en) => items.find((e) => e.obj === 'orders' && e.act === 'refund')
  t.match(refund(en), { label: 'Refund orders', group_name: 'Orders' }, 'English as declared')
  t.match(refund(es), { label: 'Reembolsar pedidos', group_name: 'Pedidos' }, 'Spanish')
  const header = (await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog', headers: { 'accept-language': 'es-ES' } })).json().data.items
  t.match(refund(header), { label: 'Reembolsar pedidos' }, 'Accept-Language too')

  await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund' } } })
  const role = (await ta.call({ method: 'GET', url: '/v2/admin/permissions/roles/clerk?lang=es' })).json().data
  t.match(role.permissions, [{ obj: 'orders', act: 'refund', label: 'Reembolsar pedidos', group_name: 'Pedidos' }], "a role's permissions too")

  // A role's deny (only a bulk list makes one) is listed apart, so the console's matrix can show it as fixed.
  const denied = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/changes',
    body: { command: 'apply-permission-changes', data: { changes: [{ kind: 'role_deny', sub_role: 'clerk', obj: 'orders', act: 'refund' }] } },
  })
  t.equal(denied.statusCode, 200, 'role_deny applied')
  const withDeny = (await ta.call({ method: 'GET', url: '/v2/admin/permissions/roles/clerk?lang=es' })).json().data
  t.same(withDeny.permissions, [], 'a denied pair is no longer among the permissions')
  t.same(withDeny.denied, [{ obj: 'orders', act: 'refund', domain: 'global', label: 'Reembolsar pedidos', group_name: 'Pedidos' }], 'it is listed as denied, localised')

  const esMessages = JSON.parse(readFileSync(new URL('../../src/i18n/es.json', import.meta.url), 'utf8')) as {
    catalog: { labels: Record<string, string>; groups: Record<string, string> }
  }
  for (const entry of declaredCatalog()) {
    t.type(esMessages.catalog.labels[`${entry.obj}:${entry.act}`], 'string', `${entry.obj}:${entry.act} has an es label`)
    t.type(esMessages.catalog.groups[entry.group], 'string', `group ${entry.group} has an es name`)
  }
})
