import t from 'tap'
import { buildTestApp, onboard, register } from '../helper.js'

t.test('profile returns the caller account without secrets', async (t) => {
  const ta = await buildTestApp(t)
  const res = await ta.call({ method: 'GET', url: '/v2/profile' })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.equal(body.response_code, '001')
  t.equal(body.response_text, 'Success')
  t.same(Object.keys(body.data).sort(), ['created_at', 'email', 'id', 'is_root', 'merchant_id', 'must_change_password', 'name', 'parent_role', 'phone', 'principal_type', 'status', 'sub_role_code'])
  t.equal(body.data.email, 'root@example.com')
  t.equal(body.data.sub_role_code, 'super_admin')
  // The one field that names the password is the flag asking for a new one; nothing else may.
  t.notMatch(res.body.replace('"must_change_password"', ''), /password|hash|argon/i)

  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
  const mine = await ta.call({ method: 'GET', url: '/v2/profile', token: ta.tokenFor(clerk) })
  t.equal(mine.statusCode, 200)
  t.equal(mine.json().data.id, clerk.id)
  t.equal(mine.json().data.merchant_id, 'm1')
})
