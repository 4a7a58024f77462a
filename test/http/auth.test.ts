import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createSigner } from 'fast-jwt'
import t from 'tap'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, buildTestApp, freshDatabase, onboard, register } from '../helper.js'

const now = () => Math.floor(Date.now() / 1000)
const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url')

t.test('HS256 tokens: every rejection is a 401', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const claims = { sub: ta.root.id, principal_type: 'system_owner' }
  const sign = (payload: object, key = TEST_SECRET, extra: object = {}) =>
    createSigner({ key, algorithm: 'HS256', ...extra })(payload as Record<string, unknown>)
  const profile = (token: string | null, headers: Record<string, string> = {}) => ta.call({ method: 'GET', url: '/v2/profile', token, headers })
  const rejected = async (name: string, res: Awaited<ReturnType<typeof profile>>, code = '201') => {
    t.equal(res.statusCode, 401, name)
    t.equal(res.json().response_code, code, `${name}: response code`)
  }

  t.equal((await profile(sign({ ...claims, exp: now() + 60 }))).statusCode, 200, 'a good token passes')
  await rejected('no header', await profile(null), '200')
  await rejected('not a bearer header', await profile(null, { authorization: 'Basic abc' }))
  await rejected('garbage token', await profile('not.a.token'))
  await rejected('alg none', await profile(`${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...claims, exp: now() + 60 })}.`))
  await rejected('bad signature', await profile(sign({ ...claims, exp: now() + 60 }, 'another-secret-that-is-long-enough')))
  await rejected('expired', await profile(sign({ ...claims, exp: now() - 10 })), '202')
  await rejected('not yet valid', await profile(sign({ ...claims, exp: now() + 600, nbf: now() + 300 })))
  await rejected('no exp', await profile(sign(claims)))
  await rejected('unknown account', await profile(sign({ sub: '00000000-0000-4000-8000-000000000000', principal_type: 'system_owner', exp: now() + 60 })))
  await rejected('sub not a uuid', await profile(sign({ sub: 'root', principal_type: 'system_owner', exp: now() + 60 })))
  await rejected('principal type disagrees', await profile(sign({ ...claims, principal_type: 'merchant', merchant_id: 'm1', exp: now() + 60 })))
  await rejected(
    'merchant id disagrees',
    await profile(sign({ sub: owner.id, principal_type: 'merchant', merchant_id: 'm2', exp: now() + 60 })),
  )
  await rejected('merchant id missing', await profile(sign({ sub: owner.id, principal_type: 'merchant', exp: now() + 60 })))
  await rejected('unknown principal type', await profile(sign({ ...claims, principal_type: 'robot', exp: now() + 60 })))

  t.test('the sub-role comes from the account, never from the token', async (t) => {
    const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
    const token = sign({ sub: clerk.id, principal_type: 'merchant', merchant_id: 'm1', sub_role_code: 'super_admin', exp: now() + 60 })
    const res = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog', token })
    t.equal(res.statusCode, 403, 'a claimed super_admin is still a clerk')
    t.equal((await ta.call({ method: 'GET', url: '/v2/profile', token })).json().data.sub_role_code, 'clerk')
  })
})

t.test('issuer and audience, when configured', async (t) => {
  const ta = await buildTestApp(t, { env: { JWT_ISSUER: 'https://issuer.example', JWT_AUDIENCE: 'admin-api' } })
  const sign = (extra: Record<string, unknown>) =>
    createSigner({ key: TEST_SECRET, algorithm: 'HS256' })({ sub: ta.root.id, principal_type: 'system_owner', exp: now() + 60, ...extra })
  const status = async (token: string) => (await ta.call({ method: 'GET', url: '/v2/profile', token })).statusCode
  t.equal(await status(sign({ iss: 'https://issuer.example', aud: 'admin-api' })), 200)
  t.equal(await status(sign({ iss: 'https://evil.example', aud: 'admin-api' })), 401, 'wrong issuer')
  t.equal(await status(sign({ iss: 'https://issuer.example', aud: 'other-api' })), 401, 'wrong audience')
  t.equal(await status(sign({ aud: 'admin-api' })), 401, 'missing issuer')
  t.equal(await status(sign({ iss: 'https://issuer.example' })), 401, 'missing audience')
  t.equal(await status(ta.rootToken), 200, 'tokens issued by login carry both')
})

t.test('login', async (t) => {
  const ta = await buildTestApp(t)
  const login = (email: string, password: string) =>
    ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email, password } } })
  const ok = await login(ROOT_EMAIL.toUpperCase(), ROOT_PASSWORD)
  t.equal(ok.statusCode, 200, 'e-mail is case-insensitive')
  t.same(Object.keys(ok.json().data).sort(), ['access_token', 'expires_in', 'token_type'])
  t.equal(ok.json().data.token_type, 'Bearer')
  t.equal(ok.json().data.expires_in, 3600)
  const me = await ta.call({ method: 'GET', url: '/v2/profile', token: ok.json().data.access_token })
  t.equal(me.json().data.email, ROOT_EMAIL)
  const wrongEmail = await login('nobody@example.com', ROOT_PASSWORD)
  const wrongPassword = await login(ROOT_EMAIL, 'wrong-password')
  t.equal(wrongEmail.statusCode, 401)
  t.equal(wrongEmail.json().response_code, '203')
  t.equal(wrongEmail.body, wrongPassword.body, 'a wrong e-mail and a wrong password answer the same')
  t.equal(wrongEmail.statusCode, wrongPassword.statusCode)
  const invalid = await login('not-an-email', 'x')
  t.equal(invalid.statusCode, 400)
})

t.test('login is rate limited per address', async (t) => {
  const ta = await buildTestApp(t, { env: { LOGIN_RATE_LIMIT_PER_MINUTE: '3' } })
  const codes: number[] = []
  for (let i = 0; i < 4; i++) {
    const res = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: ROOT_EMAIL, password: 'wrong-password' } } })
    codes.push(res.statusCode)
    if (i === 3) t.equal(res.json().response_code, '602')
  }
  t.same(codes, [401, 401, 401, 429])
})

function keyPair(type: 'rsa' | 'ec'): { publicKey: KeyObject; privateKey: KeyObject } {
  return type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ec', { namedCurve: 'P-256' })
}

t.test('RS256 and ES256 through JWT_PUBLIC_KEY', async (t) => {
  const db = await freshDatabase(t)
  for (const [type, alg] of [['rsa', 'RS256'], ['ec', 'ES256']] as const) {
    const { publicKey, privateKey } = keyPair(type)
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString()
    const ta = await buildTestApp(t, { db, env: { JWT_SECRET: undefined, JWT_PUBLIC_KEY: pem } })
    const claims = { sub: ta.root.id, principal_type: 'system_owner', exp: now() + 60 }
    const signWith = (key: KeyObject | string, algorithm: 'RS256' | 'ES256' | 'HS256') => createSigner({ key: key as string, algorithm })(claims)
    const status = async (token: string) => (await ta.call({ method: 'GET', url: '/v2/profile', token })).statusCode
    t.equal(await status(signWith(privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), alg)), 200, `${alg} token passes`)
    const other = keyPair(type).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
    t.equal(await status(signWith(other, alg)), 401, `${alg} signed by another key`)
    t.equal(await status(signWith(pem, 'HS256')), 401, 'HS256 with the public key as secret (algorithm confusion)')
    const login = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } } })
    t.equal(login.statusCode, 400)
    t.equal(login.json().response_code, '107')
  }
})

t.test('keys from a JWKS', async (t) => {
  const { publicKey, privateKey } = keyPair('rsa')
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'key-1', alg: 'RS256', use: 'sig' }
  let served = 0
  const server = createServer((req, res) => {
    served++
    if (req.url !== '/keys/jwks.json') {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  const ta = await buildTestApp(t, { env: { JWT_SECRET: undefined, JWT_JWKS_URL: `http://127.0.0.1:${port}/keys/jwks.json` } })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const sign = (kid: string) => createSigner({ key: pem, algorithm: 'RS256', kid })({ sub: ta.root.id, principal_type: 'system_owner', exp: now() + 60 })
  const status = async (token: string) => (await ta.call({ method: 'GET', url: '/v2/profile', token })).statusCode
  t.equal(await status(sign('key-1')), 200)
  t.equal(await status(sign('key-2')), 401, 'unknown kid')
  t.ok(served >= 1, 'the JWKS was fetched')
})
