import t, { type Test } from 'tap'
import { ROOT_EMAIL, ROOT_PASSWORD, buildTestApp, freshDatabase, type TestApp } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the client address behind proxies')

/** Behind proxies, the client's address is the one the trusted proxies saw; only IP addresses are stored. */

const PROXY = '10.0.0.1'

async function auditedIp(t: Test, ta: TestApp, act: string, forwardedFor: string, remoteAddress = PROXY): Promise<string | null | undefined> {
  const res = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    remoteAddress,
    headers: { 'x-forwarded-for': forwardedFor },
    body: { command: 'grant-role-permission', data: { obj: 'orders', act } },
  })
  t.equal(res.statusCode, 200, res.body)
  const { rows } = await ta.service.db.query<{ ip: string | null }>("SELECT ip FROM permission_audit WHERE action = 'grant' AND act = $1", [act])
  return rows[0]?.ip
}

t.test('the audit ip is the address the proxy saw, never the client\'s claim', async (t) => {
  const oneHop = await buildTestApp(t, { env: { TRUST_PROXY: 'true' } })
  t.equal(await auditedIp(t, oneHop, 'read', '6.6.6.6, 203.0.113.5'), '203.0.113.5', 'TRUST_PROXY=true: the rightmost entry')
  t.equal(await auditedIp(t, oneHop, 'refund', 'not-an-address'), null, 'junk is stored as null')
  t.equal(await auditedIp(t, oneHop, 'cancel', '6.6.6.6, 203.0.113.5:8080'), null, 'so is an address with a port')

  const twoHops = await buildTestApp(t, { env: { TRUST_PROXY: '2' } })
  t.equal(await auditedIp(t, twoHops, 'read', '6.6.6.6, 203.0.113.6, 10.0.0.2'), '203.0.113.6', 'a hop count')

  const listed = await buildTestApp(t, { env: { TRUST_PROXY: '10.0.0.0/8' } })
  t.equal(await auditedIp(t, listed, 'read', '6.6.6.6, 203.0.113.7, 10.0.0.2'), '203.0.113.7', 'a CIDR of proxies')
  t.equal(await auditedIp(t, listed, 'refund', '6.6.6.6', '192.0.2.9'), '192.0.2.9', 'a peer outside the list is the client')
})

t.test('login failures record the address the proxy saw, and a rotating claim does not escape the limit', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db, env: { TRUST_PROXY: 'true', LOGIN_ACCOUNT_FAILURES: '3' } })
  const login = (forwardedFor: string, password: string) =>
    ta.call({
      method: 'POST',
      url: '/v2/auth/login',
      token: null,
      remoteAddress: PROXY,
      headers: { 'x-forwarded-for': forwardedFor },
      body: { command: 'login', data: { email: ROOT_EMAIL, password } },
    })
  const statuses: number[] = []
  for (let i = 1; i <= 4; i++) statuses.push((await login(`198.18.0.${i}, 203.0.113.5`, `wrong-${i}`)).statusCode)
  t.same(statuses, [401, 401, 401, 429], 'a new claimed address on each attempt: the same client all along')
  const { rows } = await db.query<{ ip: string | null }>('SELECT host(ip) AS ip FROM login_failures ORDER BY id')
  t.same(rows, [{ ip: '203.0.113.5' }, { ip: '203.0.113.5' }, { ip: '203.0.113.5' }])

  t.equal((await login('junk', 'wrong-5')).statusCode, 401)
  const junk = await db.query<{ ip: string | null }>('SELECT ip FROM login_failures ORDER BY id DESC LIMIT 1')
  t.same(junk.rows, [{ ip: null }], 'junk is stored as null')
  t.equal((await login('198.51.100.2', ROOT_PASSWORD)).statusCode, 200, 'another client logs in')
})
