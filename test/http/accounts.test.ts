import t from 'tap'
import { buildTestApp, onboard, register } from '../helper.js'

const valid = { email: 'ana@example.com', password: 'long-enough-1', name: 'Ana', sub_role_code: 'support' }
const body = (data: Record<string, unknown>) => ({ command: 'register-admin', data })

t.test('register-admin', async (t) => {
  const ta = await buildTestApp(t)
  const m1 = await onboard(ta, 'm1')
  await onboard(ta, 'm2')
  const reg = (data: Record<string, unknown>, token = ta.rootToken) => ta.call({ method: 'POST', url: '/v2/admin/register', token, body: body(data) })

  t.test('each validation rule', async (t) => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['email required', { ...valid, email: undefined }, 'email'],
      ['email format', { ...valid, email: 'not-an-email' }, 'email'],
      ['password required', { ...valid, password: undefined }, 'password'],
      ['password at least 8', { ...valid, password: '1234567' }, 'password'],
      ['name required', { ...valid, name: undefined }, 'name'],
      ['name not empty', { ...valid, name: '' }, 'name'],
      ['sub_role_code required', { ...valid, sub_role_code: undefined }, 'sub_role_code'],
      ['sub_role_code characters', { ...valid, sub_role_code: 'Support Team' }, 'sub_role_code'],
      ['sub_role_code no commas', { ...valid, sub_role_code: 'a,b' }, 'sub_role_code'],
      ['merchant_id characters', { ...valid, merchant_id: 'm 1' }, 'merchant_id'],
      ['phone characters', { ...valid, phone: 'call me' }, 'phone'],
      ['parent_role is never sent', { ...valid, parent_role: 'merchant' }, 'parent_role'],
    ]
    for (const [name, data, field] of cases) {
      const res = await reg(JSON.parse(JSON.stringify(data)) as Record<string, unknown>)
      t.equal(res.statusCode, 400, name)
      t.equal(res.json().response_code, '100', name)
      t.ok((res.json().errors as Array<{ field: string }>).some((e) => e.field === field), `${name}: names ${field}`)
    }
    const exactly8 = await reg({ ...valid, email: 'eight@example.com', password: '12345678' })
    t.equal(exactly8.statusCode, 201, 'eight characters are enough')
  })

  t.test('super_admin is refused', async (t) => {
    const res = await reg({ ...valid, email: 'sa@example.com', sub_role_code: 'super_admin' })
    t.equal(res.statusCode, 400)
    t.equal(res.json().response_code, '103')
  })

  t.test('placement: principal type, parent role, merchant', async (t) => {
    const staff = await reg({ ...valid, email: 'staff@example.com', phone: '+34 600 000 000' })
    t.equal(staff.statusCode, 201)
    t.match(staff.json().data, { principal_type: 'system_owner', merchant_id: null, parent_role: 'system_owner', sub_role_code: 'support', phone: '+34 600 000 000' })
    t.notMatch(staff.body, /password/)
    const picked = await reg({ ...valid, email: 'picked@example.com', merchant_id: 'm2' })
    t.match(picked.json().data, { principal_type: 'merchant', merchant_id: 'm2', parent_role: 'system_owner' })
    const merchantToken = ta.tokenFor(m1)
    for (const [email, merchantId] of [['forced@example.com', 'm2'], ['forced2@example.com', 'm404'], ['forced3@example.com', undefined]] as const) {
      const res = await reg({ ...valid, email, ...(merchantId !== undefined ? { merchant_id: merchantId } : {}) }, merchantToken)
      t.equal(res.statusCode, 201, `merchant caller with merchant_id ${merchantId}`)
      t.match(res.json().data, { principal_type: 'merchant', merchant_id: 'm1', parent_role: 'merchant' })
    }
  })

  t.test('unknown merchant and duplicate e-mail', async (t) => {
    const unknown = await reg({ ...valid, email: 'lost@example.com', merchant_id: 'm404' })
    t.equal(unknown.statusCode, 404)
    t.equal(unknown.json().response_code, '402')
    const first = await reg({ ...valid, email: 'Dup@Example.com' })
    t.equal(first.statusCode, 201)
    const again = await reg({ ...valid, email: 'dup@example.COM' })
    t.equal(again.statusCode, 409)
    t.equal(again.json().response_code, '500')
  })

  t.test('a non-root caller needs admin:register', async (t) => {
    const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(m1))
    const res = await reg({ ...valid, email: 'x@example.com' }, ta.tokenFor(clerk))
    t.equal(res.statusCode, 403)
    t.equal(res.json().response_code, '300')
  })

  t.test('the assignment and the audit row are stored with the account', async (t) => {
    const made = await register(ta, { email: 'stored@m1.example', sub_role_code: 'cashier' }, ta.tokenFor(m1))
    const g = await ta.service.db.query<{ v1: string; v2: string }>("SELECT v1, v2 FROM casbin_rule WHERE ptype = 'g' AND v0 = $1", [made.id])
    t.same(g.rows, [{ v1: 'cashier', v2: 'm1' }])
    const audit = await ta.service.db.query<Record<string, string>>("SELECT action, target_type, actor_id, actor_type, domain FROM permission_audit WHERE target_id = $1", [made.id])
    t.same(audit.rows, [{ action: 'register', target_type: 'user', actor_id: m1.id, actor_type: 'merchant', domain: 'm1' }])
    const hash = await ta.service.db.query<{ password_hash: string }>('SELECT password_hash FROM admin_accounts WHERE id = $1', [made.id])
    t.match(hash.rows[0]?.password_hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/, 'argon2id with the OWASP parameters')
  })
})

t.test('onboard-merchant', async (t) => {
  const ta = await buildTestApp(t)
  const onboardReq = (data: Record<string, unknown>, token = ta.rootToken) =>
    ta.call({ method: 'POST', url: '/v2/admin/merchants', token, body: { command: 'onboard-merchant', data } })
  const data = { merchant_id: 'shop-1', email: 'owner@shop1.example', password: 'owner-pass-1', name: 'Owner' }
  const res = await onboardReq(data)
  t.equal(res.statusCode, 201)
  t.match(res.json().data, { principal_type: 'merchant', merchant_id: 'shop-1', sub_role_code: 'super_admin', parent_role: 'system_owner' })
  const again = await onboardReq({ ...data, email: 'other@shop1.example' })
  t.equal(again.statusCode, 409)
  t.equal(again.json().response_code, '501')
  const dupEmail = await onboardReq({ ...data, merchant_id: 'shop-2', email: 'OWNER@shop1.example' })
  t.equal(dupEmail.statusCode, 409)
  t.equal(dupEmail.json().response_code, '500')
  for (const reserved of ['global', 'GLOBAL', 'Global']) {
    const r = await onboardReq({ ...data, merchant_id: reserved, email: `${reserved}@x.example` })
    t.equal(r.statusCode, 400, reserved)
  }
  const owner = res.json().data as { id: string }
  const byMerchant = await onboardReq({ ...data, merchant_id: 'shop-3', email: 'x@shop3.example' }, ta.tokenFor({ id: owner.id, principal_type: 'merchant', merchant_id: 'shop-1' }))
  t.equal(byMerchant.statusCode, 403)
  t.equal(byMerchant.json().response_code, '301')
  const audit = await ta.service.db.query<{ action: string; domain: string }>('SELECT action, domain FROM permission_audit WHERE target_id = $1', [owner.id])
  t.same(audit.rows, [{ action: 'onboard', domain: 'shop-1' }])
  const login = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: data.email, password: data.password } } })
  t.equal(login.statusCode, 200, 'the new super_admin can log in')
  const sub = await ta.call({
    method: 'POST',
    url: '/v2/admin/register',
    token: login.json().data.access_token,
    body: body({ ...valid, email: 'sub@shop1.example', merchant_id: 'elsewhere' }),
  })
  t.equal(sub.statusCode, 201)
  t.equal(sub.json().data.merchant_id, 'shop-1')
})

t.test('bootstrap is idempotent', async (t) => {
  const ta = await buildTestApp(t)
  const { bootstrapSystemOwner } = await import('../../src/commands/bootstrap.js')
  const results = await Promise.all([
    bootstrapSystemOwner(ta.service, { email: 'second@example.com', password: 'second-pass-1' }),
    bootstrapSystemOwner(ta.service, { email: 'third@example.com', password: 'third-pass-1' }),
  ])
  t.same(results, [{ created: false }, { created: false }])
  const rows = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM admin_accounts WHERE merchant_id IS NULL AND sub_role_code = 'super_admin'")
  t.equal(rows.rows[0]?.n, 1)
})
