import t from 'tap'
import { ROOT_EMAIL, buildTestApp, onboard, register } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'

/** register-admin: validation, placement (the principal type follows `merchant_id`, the parent role is the caller's type), `super_admin` refused, an unknown merchant 404, who may call, and what is stored. */

const valid = { email: 'ana@example.com', password: 'long-enough-1', name: 'Ana', sub_role_code: 'support' }
// A write's answer carries the store's revision after it beside the account.
const ACCOUNT_KEYS = ['created_at', 'email', 'id', 'is_root', 'merchant_id', 'name', 'parent_role', 'phone', 'principal_type', 'revision', 'status', 'sub_role_code']
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

t.test('register-admin', async (t) => {
  const ta = await buildTestApp(t)
  const m1 = await onboard(ta, 'm1')
  await onboard(ta, 'm2')
  const m1Token = ta.tokenFor(m1)
  let n = 0
  /** Registers `data` (with a fresh e-mail unless one is given) as the token's owner. */
  const reg = (data: Record<string, unknown>, token = ta.rootToken) =>
    ta.call({ method: 'POST', url: '/v2/admin/register', token, body: { command: 'register-admin', data: { ...valid, email: `user${++n}@example.com`, ...data } } })
  const countAccounts = async () => (await ta.service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM admin_accounts')).rows[0]?.n
  const countAudit = async () => (await ta.service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_audit')).rows[0]?.n

  t.test('each validation rule is a 400 naming its field', async (t) => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['email required', { email: undefined }, 'email'],
      ['email format: no @', { email: 'not-an-email' }, 'email'],
      ['email format: no domain', { email: 'ana@' }, 'email'],
      ['email format: no local part', { email: '@example.com' }, 'email'],
      ['email format: spaces', { email: 'ana maria@example.com' }, 'email'],
      ['email empty', { email: '' }, 'email'],
      ['password required', { password: undefined }, 'password'],
      ['password of 7 characters', { password: '1234567' }, 'password'],
      ['password empty', { password: '' }, 'password'],
      ['name required', { name: undefined }, 'name'],
      ['name empty', { name: '' }, 'name'],
      ['sub_role_code required', { sub_role_code: undefined }, 'sub_role_code'],
      ['sub_role_code empty', { sub_role_code: '' }, 'sub_role_code'],
      ['sub_role_code with a space', { sub_role_code: 'support team' }, 'sub_role_code'],
      ['sub_role_code in capitals', { sub_role_code: 'Support' }, 'sub_role_code'],
      ['sub_role_code with a comma', { sub_role_code: 'a,b' }, 'sub_role_code'],
      ['sub_role_code with a wildcard', { sub_role_code: '*' }, 'sub_role_code'],
      ['sub_role_code starting with a digit', { sub_role_code: '1st' }, 'sub_role_code'],
      ['sub_role_code that looks like a user id', { sub_role_code: '3f0c4b7e-9a3b-4c7e-9d2a-1b2c3d4e5f60' }, 'sub_role_code'],
      ['merchant_id with a space', { merchant_id: 'm 1' }, 'merchant_id'],
      ['phone with letters', { phone: 'call me' }, 'phone'],
      ['parent_role is never accepted from the client', { parent_role: 'system_owner' }, 'parent_role'],
      ['principal_type is never accepted from the client', { principal_type: 'system_owner' }, 'principal_type'],
    ]
    const before = await countAccounts()
    for (const [name, data, field] of cases) {
      const res = await reg(data)
      t.equal(res.statusCode, 400, name)
      t.equal(res.json().response_code, '100', `${name}: code 100`)
      const fields = ((res.json().errors ?? []) as Array<{ field: string }>).map((e) => e.field)
      t.ok(fields.includes(field), `${name}: names ${field} (got ${fields.join(', ')})`)
      t.same(errorShapeProblems(res), [], `${name}: error envelope`)
    }
    t.equal(await countAccounts(), before, 'no invalid request stored an account')

    const short = await reg({ password: '1234567' })
    t.same(short.json().errors, [{ field: 'password', message: 'must be at least 8 characters long' }])
    const badEmail = await reg({ email: 'nope' })
    t.same(badEmail.json().errors, [{ field: 'email', message: 'must be a valid e-mail address' }])
    const missing = await ta.call({ method: 'POST', url: '/v2/admin/register', body: { command: 'register-admin', data: {} } })
    t.same(
      ((missing.json().errors ?? []) as Array<{ field: string }>).map((e) => e.field).sort(),
      ['email', 'name', 'password', 'sub_role_code'],
      'every missing required field is reported at once',
    )

    t.equal((await reg({ password: '12345678' })).statusCode, 201, 'eight characters are enough')
    t.equal((await reg({ sub_role_code: 'support_agent_2' })).statusCode, 201, 'lower case, digits and underscores are a sub-role code')
    t.equal((await reg({ phone: '+34 (600) 000-000' })).statusCode, 201, 'a phone with the usual punctuation')
  })

  t.test('super_admin is never registered', async (t) => {
    const before = await countAccounts()
    for (const [who, token] of [['system owner', ta.rootToken], ['merchant', m1Token]] as const) {
      const res = await reg({ sub_role_code: 'super_admin' }, token)
      t.equal(res.statusCode, 400, `refused for a ${who} caller`)
      t.equal(res.json().response_code, '103')
      t.match(res.json().response_text, /super_admin/)
      const withMerchant = await reg({ sub_role_code: 'super_admin', merchant_id: 'm2' }, token)
      t.equal(withMerchant.json().response_code, '103', `refused for a ${who} caller naming a merchant`)
    }
    t.equal(await countAccounts(), before)
  })

  t.test('placement: principal type, parent role, merchant', async (t) => {
    const staff = await reg({ email: 'staff@example.com', phone: '+34 600 000 000' })
    t.equal(staff.statusCode, 201)
    const data = staff.json().data
    t.same(Object.keys(data).sort(), ACCOUNT_KEYS, 'the account fields, nothing else')
    t.match(data, {
      email: 'staff@example.com',
      name: 'Ana',
      phone: '+34 600 000 000',
      principal_type: 'system_owner',
      merchant_id: null,
      sub_role_code: 'support',
      parent_role: 'system_owner',
    })
    t.match(data.id, UUID)
    t.ok(!Number.isNaN(Date.parse(data.created_at)), 'created_at is a time')
    t.notMatch(staff.body, /password|hash|argon/i, 'no password or hash')

    const noPhone = await reg({})
    t.equal(noPhone.json().data.phone, null, 'phone is null when not given')

    const picked = await reg({ merchant_id: 'm2' })
    t.equal(picked.statusCode, 201, 'a system owner may pick an existing merchant')
    t.match(picked.json().data, { principal_type: 'merchant', merchant_id: 'm2', parent_role: 'system_owner' })

    for (const merchantId of ['m2', 'no-such-merchant', 'global', undefined]) {
      const res = await reg(merchantId !== undefined ? { merchant_id: merchantId } : {}, m1Token)
      t.equal(res.statusCode, 201, `merchant caller, body merchant_id ${String(merchantId)}`)
      t.match(res.json().data, { principal_type: 'merchant', merchant_id: 'm1', parent_role: 'merchant' }, 'forced to its own merchant')
    }
    const inM2 = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM admin_accounts WHERE merchant_id = 'm2' AND parent_role = 'merchant'")
    t.equal(inM2.rows[0]?.n, 0, 'a merchant never placed anyone in another merchant')
  })

  t.test('unknown merchant, reserved id, duplicate e-mail', async (t) => {
    const before = await countAccounts()
    const auditBefore = await countAudit()
    const unknown = await reg({ merchant_id: 'm404' })
    t.equal(unknown.statusCode, 404, 'a merchant that does not exist')
    t.equal(unknown.json().response_code, '402')
    t.match(unknown.json().response_text, /m404/)
    const reserved = await reg({ merchant_id: 'global' })
    t.ok([400, 404].includes(reserved.statusCode), `global is no merchant (${reserved.statusCode})`)

    const first = await reg({ email: 'Dup@Example.com' })
    t.equal(first.statusCode, 201)
    t.equal(first.json().data.email, 'Dup@Example.com', 'the e-mail is kept as sent')
    const afterFirst = await countAccounts()
    for (const email of ['dup@example.com', 'DUP@EXAMPLE.COM', 'dUp@eXample.Com']) {
      const again = await reg({ email })
      t.equal(again.statusCode, 409, `${email} is the same e-mail`)
      t.equal(again.json().response_code, '500')
    }
    const again = await reg({ email: 'dup@example.com', merchant_id: 'm2' })
    t.equal(again.statusCode, 409, 'e-mails are unique across merchants')
    const inMerchant = await reg({ email: 'DUP@example.com' }, m1Token)
    t.equal(inMerchant.statusCode, 409, 'whoever registers it')
    const rootEmail = await reg({ email: ROOT_EMAIL.toUpperCase() })
    t.equal(rootEmail.statusCode, 409, 'the bootstrap e-mail is taken too')
    t.equal(await countAccounts(), afterFirst, 'refused registrations store nothing')
    t.equal(afterFirst, (before ?? 0) + 1)
    t.equal(await countAudit(), (auditBefore ?? 0) + 1, 'and audit nothing')
  })

  t.test('callers: only root sub-roles, unless granted admin:register', async (t) => {
    const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, m1Token)
    const staff = await register(ta, { email: 'clerk@global.example', sub_role_code: 'clerk' })
    const before = await countAccounts()
    for (const [who, token] of [['merchant sub-admin', ta.tokenFor(clerk)], ['system-owner sub-admin', ta.tokenFor(staff)]] as const) {
      const res = await reg({}, token)
      t.equal(res.statusCode, 403, `a ${who} with no grants`)
      t.equal(res.json().response_code, '300')
      t.match(res.json().response_text, /admin:register/)
    }
    t.equal(await countAccounts(), before)

    const grant = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      token: m1Token,
      body: { command: 'grant-role-permission', data: { obj: 'admin', act: 'register' } },
    })
    t.equal(grant.statusCode, 200)
    const allowed = await reg({ merchant_id: 'm2' }, ta.tokenFor(clerk))
    t.equal(allowed.statusCode, 201, 'a granted merchant sub-admin may register')
    t.match(allowed.json().data, { merchant_id: 'm1', principal_type: 'merchant', parent_role: 'merchant' }, 'into its own merchant only')
    t.equal((await reg({ sub_role_code: 'super_admin' }, ta.tokenFor(clerk))).statusCode, 400, 'still never a super_admin')
    t.equal((await reg({}, ta.tokenFor(staff))).statusCode, 403, "m1's grant does not reach system-owner clerks")
  })

  t.test('what is stored: the account, its assignment and its audit entry', async (t) => {
    for (const [who, token, caller, domain] of [
      ['merchant', m1Token, m1, 'm1'],
      ['system owner', ta.rootToken, ta.root, 'global'],
    ] as const) {
      const res = await reg({ sub_role_code: 'cashier', password: 'stored-secret-1' }, token)
      t.equal(res.statusCode, 201)
      const made = res.json().data as { id: string; email: string }
      const g = await ta.service.db.query('SELECT ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule WHERE v0 = $1', [made.id])
      t.same(g.rows, [{ ptype: 'g', v0: made.id, v1: 'cashier', v2: domain, v3: '', v4: '', v5: '' }], `${who}: g, <user>, cashier, ${domain}`)
      const audit = await ta.service.db.query('SELECT action, target_type, target_id, actor_id, actor_type, domain FROM permission_audit WHERE target_id = $1', [made.id])
      t.same(
        audit.rows,
        [{ action: 'register', target_type: 'user', target_id: made.id, actor_id: caller.id, actor_type: caller.principal_type, domain }],
        `${who}: one register entry by the caller`,
      )
      const stored = await ta.service.db.query<{ password_hash: string; created_by: string }>(
        'SELECT password_hash, created_by::text AS created_by FROM admin_accounts WHERE id = $1',
        [made.id],
      )
      t.match(stored.rows[0]?.password_hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/, `${who}: argon2id with the OWASP parameters`)
      t.notMatch(stored.rows[0]?.password_hash, /stored-secret-1/, 'never the password itself')
      t.equal(stored.rows[0]?.created_by, caller.id)
      const login = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: made.email, password: 'stored-secret-1' } } })
      t.equal(login.statusCode, 200, `${who}: the new admin can log in`)
      const me = await ta.call({ method: 'GET', url: '/v2/profile', token: login.json().data.access_token })
      t.equal(me.json().data.id, made.id)
      t.equal(me.json().data.sub_role_code, 'cashier')
    }
  })
})
