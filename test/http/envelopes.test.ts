import t from 'tap'
import { ROOT_EMAIL, ROOT_PASSWORD, buildTestApp, onboard, register, type CallOptions } from '../helper.js'
import { INTERNALS, errorShapeProblems } from '../support/envelope.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('response envelopes')

/** The success and error envelopes (`001` and data, or a code other than `001` with a localised text), and which status answers what. */

const registerData = { email: 'a@b.example', password: 'long-enough-1', name: 'A', sub_role_code: 'clerk' }
const registerBody = { command: 'register-admin', data: registerData }
const REGISTER = '/v2/admin/register'

t.test('envelopes, statuses and errors', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))

  t.test('success: exactly response_code 001, response_text Success and data', async (t) => {
    const answers: Array<[string, CallOptions, number]> = [
      ['register', { method: 'POST', url: REGISTER, body: registerBody }, 201],
      [
        'onboard',
        { method: 'POST', url: '/v2/admin/merchants', body: { command: 'onboard-merchant', data: { merchant_id: 'm2', email: 'o@m2.example', password: 'long-enough-2', name: 'O' } } },
        201,
      ],
      ['login', { method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } } }, 200],
      ['profile', { method: 'GET', url: '/v2/profile' }, 200],
      ['own permissions', { method: 'GET', url: '/v2/profile/permissions' }, 200],
      ['catalog', { method: 'GET', url: '/v2/admin/permissions/catalog' }, 200],
      [
        'grant',
        { method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read' } } },
        200,
      ],
      [
        'revoke',
        { method: 'DELETE', url: '/v2/admin/permissions/roles/clerk/revoke', body: { command: 'revoke-role-permission', data: { obj: 'orders', act: 'read' } } },
        200,
      ],
      ['check', { method: 'GET', url: '/v2/authz/check?obj=orders&act=read' }, 200],
      ['health', { method: 'GET', url: '/healthz', token: null }, 200],
    ]
    for (const [name, request, status] of answers) {
      const res = await ta.call(request)
      t.equal(res.statusCode, status, `${name} answers ${status}`)
      t.match(res.headers['content-type'], /^application\/json/, `${name}: JSON`)
      const body = res.json()
      t.same(Object.keys(body).sort(), ['data', 'response_code', 'response_text'], `${name}: exactly the three keys`)
      t.equal(body.response_code, '001', `${name}: 001`)
      t.equal(body.response_text, 'Success', `${name}: Success`)
      t.ok(typeof body.data === 'object' && body.data !== null && !Array.isArray(body.data), `${name}: data is an object`)
    }
    const es = await ta.call({ method: 'GET', url: '/v2/profile?lang=es' })
    t.equal(es.json().response_text, 'Success', 'the success text is not localised')
  })

  t.test('authentication runs before anything else', async (t) => {
    const cases: Array<[string, CallOptions]> = [
      ['an invalid body', { method: 'POST', url: REGISTER, token: null, body: { command: 'register-admin', data: {} } }],
      ['malformed JSON', { method: 'POST', url: REGISTER, token: null, body: '{"command":' }],
      ['a wrong command', { method: 'POST', url: REGISTER, token: null, body: { ...registerBody, command: 'login' } }],
      ['text/plain', { method: 'POST', url: REGISTER, token: null, body: 'hello', headers: { 'content-type': 'text/plain' } }],
      ['a bad path parameter', { method: 'GET', url: '/v2/admin/permissions/users/not-a-uuid', token: null }],
      ['a bad query', { method: 'GET', url: '/v2/admin/permissions/audit-log?page=0', token: null }],
    ]
    for (const [name, request] of cases) {
      const res = await ta.call(request)
      t.equal(res.statusCode, 401, `${name} without a token is a 401`)
      t.equal(res.json().response_code, '200', `${name}: code 200`)
      const bad = await ta.call({ ...request, token: 'not.a.token' })
      t.equal(bad.statusCode, 401, `${name} with a bad token is a 401`)
      t.equal(bad.json().response_code, '201', `${name} with a bad token: code 201`)
    }
  })

  t.test('client errors are clear 4xx answers', async (t) => {
    const withData = (data: Record<string, unknown>) => ({ command: 'register-admin', data: { ...registerData, ...data } })
    const cases: Array<[string, CallOptions, number, string, string?]> = [
      ['malformed JSON', { method: 'POST', url: REGISTER, body: '{"command": "register-admin", ' }, 400, '101'],
      ['an empty JSON body', { method: 'POST', url: REGISTER, body: '' }, 400, '101'],
      ['JSON with a trailing comma', { method: 'POST', url: REGISTER, body: '{"command":"register-admin",}' }, 400, '101'],
      ['text/plain', { method: 'POST', url: REGISTER, body: JSON.stringify(registerBody), headers: { 'content-type': 'text/plain' } }, 415, '601'],
      ['form data', { method: 'POST', url: REGISTER, body: 'a=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, '601'],
      ['a body over 1 MiB', { method: 'POST', url: REGISTER, body: JSON.stringify({ ...registerBody, pad: 'x'.repeat(1024 * 1024) }) }, 413, '600'],
      ['a number for a string', { method: 'POST', url: REGISTER, body: withData({ email: 123 }) }, 400, '100', 'email'],
      ['a number for the password', { method: 'POST', url: REGISTER, body: withData({ password: 12345678 }) }, 400, '100', 'password'],
      ['a boolean for the name', { method: 'POST', url: REGISTER, body: withData({ name: true }) }, 400, '100', 'name'],
      ['null for a string', { method: 'POST', url: REGISTER, body: withData({ sub_role_code: null }) }, 400, '100', 'sub_role_code'],
      ['an array for a string', { method: 'POST', url: REGISTER, body: withData({ email: ['a@b.example'] }) }, 400, '100', 'email'],
      ['a string for the data object', { method: 'POST', url: REGISTER, body: { command: 'register-admin', data: 'x' } }, 400, '100', 'data'],
      ['no data', { method: 'POST', url: REGISTER, body: { command: 'register-admin' } }, 400, '100', 'data'],
      ['an array body', { method: 'POST', url: REGISTER, body: [] }, 400, '100'],
      ['a JSON string body', { method: 'POST', url: REGISTER, body: '"register-admin"' }, 400, '100'],
      ['an unknown field in data', { method: 'POST', url: REGISTER, body: withData({ domian: 'm1' }) }, 400, '100', 'domian'],
      ['an unknown top-level field', { method: 'POST', url: REGISTER, body: { ...registerBody, extra: 1 } }, 400, '100', 'extra'],
      ['a command of another endpoint', { method: 'POST', url: REGISTER, body: { ...registerBody, command: 'grant-role-permission' } }, 400, '102'],
      ['a command in another case', { method: 'POST', url: REGISTER, body: { ...registerBody, command: 'Register-Admin' } }, 400, '102'],
      ['no command', { method: 'POST', url: REGISTER, body: { data: registerData } }, 400, '100', 'command'],
      ['an unknown route', { method: 'GET', url: '/v2/nothing/here' }, 404, '400'],
      ['an unknown route under a known prefix', { method: 'POST', url: '/v2/admin/registerx', body: registerBody }, 404, '400'],
      ['a bad path parameter', { method: 'GET', url: '/v2/admin/permissions/users/42' }, 400, '100', 'userId'],
      ['a bad query parameter', { method: 'GET', url: '/v2/admin/permissions/audit-log?page_size=101' }, 400, '100', 'page_size'],
      ['super_admin on register', { method: 'POST', url: REGISTER, body: withData({ email: 'sa@b.example', sub_role_code: 'super_admin' }) }, 400, '103'],
      ['no permission', { method: 'GET', url: '/v2/admin/permissions/catalog', token: ta.tokenFor(clerk) }, 403, '300'],
      ['a merchant onboarding', { method: 'POST', url: '/v2/admin/merchants', token: ta.tokenFor(owner), body: { command: 'onboard-merchant', data: { merchant_id: 'm9', email: 'o@m9.example', password: 'long-enough-9', name: 'O' } } }, 403, '301'],
      ['unknown merchant', { method: 'POST', url: REGISTER, body: withData({ email: 'u@b.example', merchant_id: 'm404' }) }, 404, '402'],
      ['a duplicate e-mail', { method: 'POST', url: REGISTER, body: withData({ email: ROOT_EMAIL }) }, 409, '500'],
      ['no token', { method: 'GET', url: '/v2/profile', token: null }, 401, '200'],
      ['a bad login', { method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: ROOT_EMAIL, password: 'nope-nope' } } }, 401, '203'],
    ]
    for (const [name, request, status, code, field] of cases) {
      const res = await ta.call(request)
      t.equal(res.statusCode, status, `${name}: status ${status}`)
      t.equal(res.json().response_code, code, `${name}: response code ${code}`)
      t.same(errorShapeProblems(res), [], `${name}: the error envelope`)
      if (field !== undefined) {
        const fields = ((res.json().errors ?? []) as Array<{ field: string }>).map((e) => e.field)
        t.ok(fields.includes(field), `${name}: names ${field} (got ${fields.join(', ')})`)
      }
    }

    const typed = await ta.call({ method: 'POST', url: REGISTER, body: withData({ email: 123 }) })
    t.same(typed.json().errors, [{ field: 'email', message: 'must be of type string' }], 'a wrong type is named, not coerced')
    const numericPassword = await ta.call({ method: 'POST', url: REGISTER, body: withData({ email: 'coerce@b.example', password: 12345678 }) })
    t.equal(numericPassword.statusCode, 400, 'a number is never taken for a password')
    const coerced = await ta.service.db.query("SELECT 1 FROM admin_accounts WHERE email IN ('123', 'coerce@b.example')")
    t.equal(coerced.rows.length, 0, 'nothing was stored from the rejected bodies')
    const unknown = await ta.call({ method: 'POST', url: REGISTER, body: withData({ domian: 'm1' }) })
    t.same(unknown.json().errors, [{ field: 'domian', message: 'is not a known field' }])
    const mismatch = await ta.call({ method: 'POST', url: REGISTER, body: { ...registerBody, command: 'grant-role-permission' } })
    t.match(mismatch.json().response_text, /"register-admin"/, 'the mismatch names the expected command')
    const route = await ta.call({ method: 'GET', url: '/v2/nothing/here?x=1' })
    t.equal(route.json().response_text, 'There is no endpoint GET /v2/nothing/here.')
    const tooBig = await ta.call({ method: 'POST', url: REGISTER, body: JSON.stringify({ ...registerBody, pad: 'x'.repeat(1024 * 1024) }) })
    t.match(tooBig.json().response_text, /1048576/, 'the limit is 1 MiB')
    const justUnder = await ta.call({ method: 'POST', url: REGISTER, body: JSON.stringify({ ...registerBody, pad: 'x'.repeat(1024 * 1024 - 200) }) })
    t.equal(justUnder.statusCode, 400, 'a body just under the limit is read (and refused for its unknown field)')
    t.equal(justUnder.json().response_code, '100')
  })

  // Last: it closes the database under the app.
  t.test('a bug is a 500 that shows nothing of its cause', async (t) => {
    const broken = ta
    await broken.service.db.close()
    const res = await broken.call({ method: 'POST', url: REGISTER, body: registerBody })
    t.equal(res.statusCode, 500)
    t.equal(res.json().response_code, '900')
    t.same(Object.keys(res.json()).sort(), ['response_code', 'response_text'])
    t.same(errorShapeProblems(res), [])
    t.notMatch(res.body, INTERNALS)
    t.notMatch(res.body, /closed|pglite|pool|ECONN|terminat/i, 'not even the database error text')
    const es = await broken.call({ method: 'POST', url: `${REGISTER}?lang=es`, body: registerBody })
    t.equal(es.json().response_text, 'Algo salió mal de nuestro lado. El error ha quedado registrado.', 'localised like any other error')
  })
})
