import t from 'tap'
import { buildTestApp, register } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'

/** onboard-merchant: a merchant exists once its super_admin exists, so onboarding creates both, for system-owner callers only, once per merchant id. */

// A write's answer carries the store's revision after it beside the account.
const ACCOUNT_KEYS = ['created_at', 'email', 'id', 'is_root', 'merchant_id', 'name', 'parent_role', 'phone', 'principal_type', 'revision', 'status', 'sub_role_code']

t.test('onboard-merchant', async (t) => {
  const ta = await buildTestApp(t)
  const onboard = (data: Record<string, unknown>, token = ta.rootToken) =>
    ta.call({ method: 'POST', url: '/v2/admin/merchants', token, body: { command: 'onboard-merchant', data } })
  const counts = async () => {
    const { rows } = await ta.service.db.query<{ accounts: number; audit: number; merchants: number }>(
      `SELECT (SELECT count(*)::int FROM admin_accounts) AS accounts,
              (SELECT count(*)::int FROM permission_audit) AS audit,
              (SELECT count(*)::int FROM merchants) AS merchants`,
    )
    return rows[0]
  }
  const shop = { merchant_id: 'shop-1', email: 'owner@shop1.example', password: 'owner-pass-1', name: 'Owner', phone: '+1 555 0100' }

  const created = await onboard(shop)
  t.equal(created.statusCode, 201, 'onboarding answers 201')
  t.equal(created.json().response_code, '001')
  const owner = created.json().data as { id: string; email: string }
  t.same(Object.keys(owner).sort(), ACCOUNT_KEYS)
  t.match(owner, {
    email: 'owner@shop1.example',
    name: 'Owner',
    phone: '+1 555 0100',
    principal_type: 'merchant',
    merchant_id: 'shop-1',
    sub_role_code: 'super_admin',
    is_root: true,
    parent_role: 'system_owner',
  })
  t.notMatch(created.body, /password|hash|argon/i)

  t.test('what is stored', async (t) => {
    const g = await ta.service.db.query('SELECT ptype, v0, v1, v2 FROM casbin_rule WHERE v0 = $1', [owner.id])
    t.same(g.rows, [{ ptype: 'g', v0: owner.id, v1: 'super_admin', v2: 'shop-1' }], 'g, <user>, super_admin, shop-1')
    const audit = await ta.service.db.query('SELECT action, target_type, target_id, actor_id, actor_type, domain FROM permission_audit WHERE target_id = $1', [owner.id])
    t.same(audit.rows, [{ action: 'onboard', target_type: 'user', target_id: owner.id, actor_id: ta.root.id, actor_type: 'system_owner', domain: 'shop-1' }])
    const log = await ta.call({ method: 'GET', url: `/v2/admin/permissions/audit-log?action=onboard&target_id=${owner.id}` })
    t.equal(log.json().data.total, 1, 'the audit list shows the onboarding')
  })

  t.test('conflicts and refusals store nothing', async (t) => {
    const before = await counts()
    const again = await onboard({ ...shop, email: 'other@shop1.example' })
    t.equal(again.statusCode, 409, 'the same merchant twice')
    t.equal(again.json().response_code, '501')
    t.same(errorShapeProblems(again), [])
    const dupEmail = await onboard({ ...shop, merchant_id: 'shop-2', email: 'OWNER@Shop1.example' })
    t.equal(dupEmail.statusCode, 409, 'an e-mail already taken, in another case')
    t.equal(dupEmail.json().response_code, '500')
    const rootEmail = await onboard({ ...shop, merchant_id: 'shop-2', email: 'ROOT@example.com' })
    t.equal(rootEmail.json().response_code, '500', "the system owner's e-mail")
    for (const reserved of ['global', 'GLOBAL', 'Global', 'gLoBaL']) {
      const res = await onboard({ ...shop, merchant_id: reserved, email: `${reserved}@x.example` })
      t.equal(res.statusCode, 400, `${reserved} is the global domain, never a merchant`)
      t.equal(res.json().response_code, '100')
      t.same(res.json().errors, [{ field: 'merchant_id', message: 'is reserved' }])
    }
    const invalid: Array<[string, Record<string, unknown>, string]> = [
      ['no merchant_id', { ...shop, merchant_id: undefined }, 'merchant_id'],
      ['a merchant_id with a space', { ...shop, merchant_id: 'shop 9' }, 'merchant_id'],
      ['a merchant_id with a comma', { ...shop, merchant_id: 'a,b' }, 'merchant_id'],
      ['a short password', { ...shop, merchant_id: 'shop-9', password: 'short' }, 'password'],
      ['a bad e-mail', { ...shop, merchant_id: 'shop-9', email: 'owner' }, 'email'],
      ['no name', { ...shop, merchant_id: 'shop-9', name: undefined }, 'name'],
      ['a sub_role_code', { ...shop, merchant_id: 'shop-9', email: 'x@shop9.example', sub_role_code: 'clerk' }, 'sub_role_code'],
    ]
    for (const [name, data, field] of invalid) {
      const res = await onboard(JSON.parse(JSON.stringify(data)) as Record<string, unknown>)
      t.equal(res.statusCode, 400, name)
      t.ok(((res.json().errors ?? []) as Array<{ field: string }>).some((e) => e.field === field), `${name}: names ${field}`)
    }
    const wrongCommand = await ta.call({
      method: 'POST',
      url: '/v2/admin/merchants',
      body: { command: 'register-admin', data: { ...shop, merchant_id: 'shop-9', email: 'y@shop9.example' } },
    })
    t.equal(wrongCommand.json().response_code, '102')

    const merchantCaller = await onboard({ ...shop, merchant_id: 'shop-3', email: 'x@shop3.example' }, ta.tokenFor({ id: owner.id, principal_type: 'merchant', merchant_id: 'shop-1' }))
    t.equal(merchantCaller.statusCode, 403, 'a merchant super_admin may not onboard')
    t.equal(merchantCaller.json().response_code, '301')
    t.match(merchantCaller.json().response_text, /merchant/)

    const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'support' })
    const nonRoot = await onboard({ ...shop, merchant_id: 'shop-4', email: 'x@shop4.example' }, ta.tokenFor(staff))
    t.equal(nonRoot.statusCode, 403, 'a system-owner sub-admin without merchant:onboard may not')
    t.equal(nonRoot.json().response_code, '300')
    t.match(nonRoot.json().response_text, /merchant:onboard/)

    const after = await counts()
    t.same(after, { ...before, accounts: (before?.accounts ?? 0) + 1, audit: (before?.audit ?? 0) + 1 }, 'only the staff registration was stored')
    t.equal(after?.merchants, 1, 'still one merchant')
  })

  t.test('the new super_admin works in its own merchant only', async (t) => {
    const second = await onboard({ merchant_id: 'shop-2', email: 'owner@shop2.example', password: 'owner-pass-2', name: 'Two' })
    t.equal(second.statusCode, 201, 'another merchant')
    const login = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: shop.email, password: shop.password } } })
    t.equal(login.statusCode, 200, 'the new super_admin can log in')
    const token = login.json().data.access_token as string
    const me = await ta.call({ method: 'GET', url: '/v2/profile', token })
    t.match(me.json().data, { id: owner.id, merchant_id: 'shop-1', sub_role_code: 'super_admin' })

    for (const merchantId of [undefined, 'shop-1', 'shop-2', 'elsewhere']) {
      const res = await ta.call({
        method: 'POST',
        url: '/v2/admin/register',
        token,
        body: {
          command: 'register-admin',
          data: { email: `sub-${String(merchantId)}@shop1.example`, password: 'sub-pass-123', name: 'Sub', sub_role_code: 'cashier', ...(merchantId !== undefined ? { merchant_id: merchantId } : {}) },
        },
      })
      t.equal(res.statusCode, 201, `registers with body merchant_id ${String(merchantId)}`)
      t.match(res.json().data, { merchant_id: 'shop-1', principal_type: 'merchant', parent_role: 'merchant', sub_role_code: 'cashier' }, 'into shop-1')
    }
    const inShop2 = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM admin_accounts WHERE merchant_id = 'shop-2'")
    t.equal(inShop2.rows[0]?.n, 1, 'shop-2 holds only its own super_admin')
    const root = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog', token })
    t.equal(root.statusCode, 200, 'it is root in its merchant')
  })
})
