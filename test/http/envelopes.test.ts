import t from 'tap'
import { buildTestApp } from '../helper.js'

const register = { command: 'register-admin', data: { email: 'a@b.example', password: 'long-enough-1', name: 'A', sub_role_code: 'clerk' } }

t.test('envelopes, statuses and errors (CONTRACT section 5)', async (t) => {
  const ta = await buildTestApp(t)
  const noStack = (body: string, name: string) => {
    t.notMatch(body, /\n\s+at |Error:|SELECT |INSERT |node_modules|\.ts:\d+/, `${name}: no internals`)
  }

  t.test('success shape and statuses', async (t) => {
    const created = await ta.call({ method: 'POST', url: '/v2/admin/register', body: register })
    t.equal(created.statusCode, 201, 'register answers 201')
    t.same(Object.keys(created.json()).sort(), ['data', 'response_code', 'response_text'])
    t.equal(created.json().response_code, '001')
    t.equal(created.json().response_text, 'Success')
    const read = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog' })
    t.equal(read.statusCode, 200)
    t.match(read.headers['content-type'], /application\/json/)
  })

  t.test('authentication runs before anything else', async (t) => {
    const invalid = await ta.call({ method: 'POST', url: '/v2/admin/register', token: null, body: { command: 'register-admin', data: {} } })
    t.equal(invalid.statusCode, 401)
    const malformed = await ta.call({ method: 'POST', url: '/v2/admin/register', token: null, body: '{"command":' })
    t.equal(malformed.statusCode, 401)
    const tooBig = await ta.call({ method: 'POST', url: '/v2/admin/register', token: null, body: JSON.stringify({ pad: 'x'.repeat(1_100_000) }) })
    t.equal(tooBig.statusCode, 401)
  })

  t.test('client errors are clear 4xx answers', async (t) => {
    const cases: Array<[string, Parameters<typeof ta.call>[0], number, string]> = [
      ['malformed JSON', { method: 'POST', url: '/v2/admin/register', body: '{"command": "register-admin", ' }, 400, '101'],
      ['empty JSON body', { method: 'POST', url: '/v2/admin/register', body: '' }, 400, '101'],
      ['text/plain', { method: 'POST', url: '/v2/admin/register', body: 'hello', headers: { 'content-type': 'text/plain' } }, 415, '601'],
      ['form data', { method: 'POST', url: '/v2/admin/register', body: 'a=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, '601'],
      ['over 1 MiB', { method: 'POST', url: '/v2/admin/register', body: JSON.stringify({ ...register, pad: 'x'.repeat(1_100_000) }) }, 413, '600'],
      ['number for a string', { method: 'POST', url: '/v2/admin/register', body: { ...register, data: { ...register.data, email: 123 } } }, 400, '100'],
      ['string for the data object', { method: 'POST', url: '/v2/admin/register', body: { command: 'register-admin', data: 'x' } }, 400, '100'],
      ['array body', { method: 'POST', url: '/v2/admin/register', body: [] }, 400, '100'],
      ['unknown field', { method: 'POST', url: '/v2/admin/register', body: { ...register, data: { ...register.data, domian: 'm1' } } }, 400, '100'],
      ['unknown top-level field', { method: 'POST', url: '/v2/admin/register', body: { ...register, extra: 1 } }, 400, '100'],
      ['wrong command', { method: 'POST', url: '/v2/admin/register', body: { ...register, command: 'grant-role-permission' } }, 400, '102'],
      ['missing command', { method: 'POST', url: '/v2/admin/register', body: { data: register.data } }, 400, '100'],
      ['unknown route', { method: 'GET', url: '/v2/nothing/here' }, 404, '400'],
      ['bad path parameter', { method: 'GET', url: '/v2/admin/permissions/users/42' }, 400, '100'],
    ]
    for (const [name, request, status, code] of cases) {
      const res = await ta.call(request)
      t.equal(res.statusCode, status, name)
      const body = res.json()
      t.equal(body.response_code, code, `${name}: response code`)
      t.type(body.response_text, 'string')
      t.ok(body.response_text.length > 0)
      noStack(res.body, name)
    }
    const typed = await ta.call({ method: 'POST', url: '/v2/admin/register', body: { ...register, data: { ...register.data, email: 123 } } })
    t.match(typed.json().errors, [{ field: 'email', message: /type string/ }], 'the failing field is named')
    const mismatch = await ta.call({ method: 'POST', url: '/v2/admin/register', body: { ...register, command: 'grant-role-permission' } })
    t.match(mismatch.json().response_text, /register-admin/)
  })
})
