import t from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { createPasswordHasher, type PasswordHasher } from '../../src/security/passwords.js'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, buildTestApp, buildTestService, freshDatabase, onboard, register, type TestApp } from '../helper.js'
import { decodePayload, keyPair, nowSeconds, rawToken, serveJwks, sign } from '../support/jwt.js'

/** Who may call, with which token (its account must exist and agree with it; the sub-role comes from the database), and how login hands tokens out. */

const OTHER_SECRET = 'another-secret-that-is-also-long-enough-42'

type Claims = Record<string, unknown>

const claimsOf = (account: Pick<Account, 'id' | 'principal_type' | 'merchant_id'>, extra: Claims = {}): Claims => ({
  sub: account.id,
  principal_type: account.principal_type,
  ...(account.merchant_id !== null ? { merchant_id: account.merchant_id } : {}),
  exp: nowSeconds() + 300,
  ...extra,
})

const profile = (ta: TestApp, token: string | null, headers: Record<string, string> = {}) =>
  ta.call({ method: 'GET', url: '/v2/profile', token, headers })

let address = 0
/** Each login from its own address, so the per-address rate limit never interferes with what a test checks. */
const login = (ta: TestApp, email: string, password: string, remoteAddress = `10.1.${Math.floor(++address / 250)}.${(address % 250) + 1}`) =>
  ta.call({ method: 'POST', url: '/v2/auth/login', token: null, remoteAddress, body: { command: 'login', data: { email, password } } })

t.test('authentication and login', async (t) => {
  // One database for every configuration in this file: each app is a different verifier over the same accounts.
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db, env: { LOGIN_RATE_LIMIT_PER_MINUTE: '3' } })
  const owner = await onboard(ta, 'm1')
  await onboard(ta, 'm2')
  const ownerToken = ta.tokenFor(owner)

  t.test('HS256: a good token passes, every broken one is a 401', async (t) => {
    const good = sign(claimsOf(ta.root), TEST_SECRET)
    const ok = await profile(ta, good)
    t.equal(ok.statusCode, 200, 'a good token passes')
    t.equal(ok.json().data.id, ta.root.id)
    t.equal((await profile(ta, sign(claimsOf(owner), TEST_SECRET))).json().data.id, owner.id, 'a good merchant token passes')

    const rejected = async (name: string, token: string | null, code: string, headers: Record<string, string> = {}) => {
      const res = await profile(ta, token, headers)
      t.equal(res.statusCode, 401, name)
      t.equal(res.json().response_code, code, `${name}: response code ${code}`)
      t.notOk('data' in res.json(), `${name}: no data`)
    }
    const [header, payload, signature] = good.split('.') as [string, string, string]

    await rejected('no Authorization header', null, '200')
    await rejected('an empty Authorization header', null, '200', { authorization: '' })
    await rejected('a Basic header', null, '201', { authorization: 'Basic cm9vdDpyb290' })
    await rejected('the token without the Bearer scheme', null, '201', { authorization: good })
    await rejected('Bearer and nothing else', null, '201', { authorization: 'Bearer' })
    await rejected('Bearer and a blank', null, '201', { authorization: 'Bearer    ' })
    await rejected('garbage', 'not-a-jwt', '201')
    await rejected('two parts', `${header}.${payload}`, '201')
    await rejected('four parts', `${good}.${signature}`, '201')
    await rejected('alg none, no signature', rawToken({ alg: 'none', typ: 'JWT' }, claimsOf(ta.root)), '201')
    await rejected('alg none with the signature of a good token', rawToken({ alg: 'none', typ: 'JWT' }, claimsOf(ta.root), signature), '201')
    await rejected('alg None', rawToken({ alg: 'None', typ: 'JWT' }, claimsOf(ta.root)), '201')
    await rejected('signed with another secret', sign(claimsOf(ta.root), OTHER_SECRET), '201')
    await rejected('HS512 with the right secret (algorithm not allowed)', sign(claimsOf(ta.root), TEST_SECRET, 'HS512'), '201')
    await rejected('payload swapped under a good signature', `${header}.${rawToken({}, claimsOf(owner)).split('.')[1] ?? ''}.${signature}`, '201')
    await rejected('signature removed', `${header}.${payload}.`, '201')
    await rejected('expired', sign(claimsOf(ta.root, { exp: nowSeconds() - 30 }), TEST_SECRET), '202')
    await rejected('not valid before a future nbf', sign(claimsOf(ta.root, { nbf: nowSeconds() + 600, exp: nowSeconds() + 1200 }), TEST_SECRET), '201')
    await rejected('no exp', sign({ sub: ta.root.id, principal_type: 'system_owner' }, TEST_SECRET), '201')
    await rejected('no sub', sign({ principal_type: 'system_owner', exp: nowSeconds() + 300 }, TEST_SECRET), '201')

    const t200 = await profile(ta, sign(claimsOf(ta.root, { nbf: nowSeconds() - 5 }), TEST_SECRET))
    t.equal(t200.statusCode, 200, 'a past nbf is fine')
  })

  t.test('the token must name an account that agrees with it', async (t) => {
    const rejected = async (name: string, claims: Claims) => {
      const res = await profile(ta, sign(claims, TEST_SECRET))
      t.equal(res.statusCode, 401, name)
      t.equal(res.json().response_code, '201', `${name}: response code`)
    }
    const exp = nowSeconds() + 300
    await rejected('a sub that names no account', { sub: '00000000-0000-4000-8000-000000000000', principal_type: 'system_owner', exp })
    await rejected('a sub that is not an id', { sub: 'root', principal_type: 'system_owner', exp })
    await rejected('a numeric sub', { sub: 42, principal_type: 'system_owner', exp })
    await rejected('system owner claimed as merchant', claimsOf(ta.root, { principal_type: 'merchant', merchant_id: 'm1' }))
    await rejected('system owner with a merchant id', claimsOf(ta.root, { merchant_id: 'm1' }))
    await rejected('system owner claimed as merchant, no merchant id', { sub: ta.root.id, principal_type: 'merchant', exp })
    await rejected('system owner with no principal type', { sub: ta.root.id, exp })
    await rejected('an unknown principal type', claimsOf(ta.root, { principal_type: 'robot' }))
    await rejected('merchant claimed as system owner', { sub: owner.id, principal_type: 'system_owner', exp })
    await rejected('merchant claimed as system owner, right merchant id', claimsOf(owner, { principal_type: 'system_owner' }))
    await rejected('merchant with another merchant id', claimsOf(owner, { merchant_id: 'm2' }))
    await rejected('merchant without its merchant id', { sub: owner.id, principal_type: 'merchant', exp })
    await rejected('merchant id in another case', claimsOf(owner, { merchant_id: 'M1' }))
  })

  t.test('the sub-role comes from the database, never from the token', async (t) => {
    const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ownerToken)
    const granted = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/auditor/grant',
      token: ownerToken,
      body: { command: 'grant-role-permission', data: { obj: 'permission', act: 'read' } },
    })
    t.equal(granted.statusCode, 200, 'auditors of m1 may read permissions')

    const catalog = (token: string) => ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog', token })
    const token = ta.tokenFor(clerk)
    t.notOk('sub_role_code' in decodePayload(token), 'issued tokens carry no sub-role')
    t.equal((await catalog(token)).statusCode, 403, 'a clerk may not')

    const claimsRoot = sign(claimsOf(clerk, { sub_role_code: 'super_admin', is_root: true }), TEST_SECRET)
    const claimed = await catalog(claimsRoot)
    t.equal(claimed.statusCode, 403, 'a token claiming super_admin is still a clerk')
    t.equal(claimed.json().response_code, '300')
    const claimedAuditor = sign(claimsOf(clerk, { sub_role_code: 'auditor' }), TEST_SECRET)
    t.equal((await catalog(claimedAuditor)).statusCode, 403, 'a token claiming auditor is still a clerk')
    t.equal((await profile(ta, claimsRoot)).json().data.sub_role_code, 'clerk')

    // The role changes in the database; the same tokens now carry the new role.
    await ta.service.db.query("UPDATE admin_accounts SET sub_role_code = 'auditor' WHERE id = $1", [clerk.id])
    await ta.service.db.query("UPDATE casbin_rule SET v1 = 'auditor' WHERE ptype = 'g' AND v0 = $1", [clerk.id])
    await ta.service.reload()
    t.equal((await catalog(token)).statusCode, 200, 'the unchanged token now has the auditor grants')
    t.equal((await profile(ta, token)).json().data.sub_role_code, 'auditor')
    t.equal((await catalog(claimsRoot)).statusCode, 200)
    const stillNotRoot = await ta.call({
      method: 'POST',
      url: '/v2/admin/register',
      token: claimsRoot,
      body: { command: 'register-admin', data: { email: 'x@m1.example', password: 'long-enough-1', name: 'X', sub_role_code: 'clerk' } },
    })
    t.equal(stillNotRoot.statusCode, 403, 'and is still not root whatever it claims')
  })

  t.test('login', async (t) => {
    const ok = await login(ta, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(ok.statusCode, 200)
    const body = ok.json()
    t.same(Object.keys(body).sort(), ['data', 'response_code', 'response_text'])
    t.equal(body.response_code, '001')
    t.same(Object.keys(body.data).sort(), ['access_token', 'expires_in', 'token_type'])
    t.equal(body.data.token_type, 'Bearer')
    t.equal(body.data.expires_in, 3600, 'the default lifetime')
    t.type(body.data.access_token, 'string')
    const claims = decodePayload(body.data.access_token)
    t.equal(claims.sub, ta.root.id)
    t.equal(claims.principal_type, 'system_owner')
    t.notOk('merchant_id' in claims)
    t.equal(Number(claims.exp) - Number(claims.iat), 3600, 'exp is expires_in after iat')
    const me = await profile(ta, body.data.access_token)
    t.equal(me.statusCode, 200, 'the token works')
    t.equal(me.json().data.email, ROOT_EMAIL)

    const upper = await login(ta, ROOT_EMAIL.toUpperCase(), ROOT_PASSWORD)
    t.equal(upper.statusCode, 200, 'the e-mail is case-insensitive')
    t.equal(decodePayload(upper.json().data.access_token).sub, ta.root.id)
    t.equal((await login(ta, 'Root@Example.COM', ROOT_PASSWORD)).statusCode, 200)
    t.equal((await login(ta, ROOT_EMAIL, ROOT_PASSWORD.toUpperCase())).statusCode, 401, 'the password is not')

    const merchant = await login(ta, 'owner@m1.example', 'merchant-pass-1')
    t.equal(merchant.statusCode, 200)
    t.match(decodePayload(merchant.json().data.access_token), { sub: owner.id, principal_type: 'merchant', merchant_id: 'm1' })
    t.equal((await profile(ta, merchant.json().data.access_token)).json().data.merchant_id, 'm1')

    const wrongEmail = await login(ta, 'nobody@example.com', ROOT_PASSWORD)
    const wrongPassword = await login(ta, ROOT_EMAIL, 'wrong-password')
    t.equal(wrongEmail.statusCode, 401)
    t.equal(wrongEmail.json().response_code, '203')
    t.equal(wrongPassword.statusCode, wrongEmail.statusCode, 'a wrong e-mail and a wrong password: same status')
    t.equal(wrongPassword.body, wrongEmail.body, 'and the same body')
    t.equal(wrongPassword.headers['content-length'], wrongEmail.headers['content-length'])

    const invalid = await login(ta, 'not-an-email', 'whatever')
    t.equal(invalid.statusCode, 400, 'an invalid e-mail is a validation error')
    t.equal(invalid.json().response_code, '100')
    const mismatch = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, remoteAddress: '10.2.0.1', body: { command: 'logon', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } } })
    t.equal(mismatch.statusCode, 400)
    t.equal(mismatch.json().response_code, '102')
  })

  t.test('a wrong e-mail costs as much as a wrong password: both verify a password hash', async (t) => {
    // Without the dummy hash for unknown e-mails, the wrong e-mail would skip the argon2 verification and
    // answer in a fraction of the time. What is asserted is the work done, not how long it took.
    const argon2 = createPasswordHasher()
    const verified: string[] = []
    const passwords: PasswordHasher = {
      hash: (password) => argon2.hash(password),
      verify: async (stored, password) => {
        const valid = await argon2.verify(stored, password)
        verified.push(`${stored === null ? 'the dummy hash' : 'the stored hash'}: ${String(valid)}`)
        return valid
      },
    }
    const counted = await buildTestApp(t, { service: await buildTestService(t, { db, passwords }) })
    const unknown = await login(counted, 'nobody@example.com', 'wrong-password')
    const known = await login(counted, ROOT_EMAIL, 'wrong-password')
    const right = await login(counted, ROOT_EMAIL, ROOT_PASSWORD)
    t.same([unknown.statusCode, known.statusCode, right.statusCode], [401, 401, 200])
    t.same(verified, ['the dummy hash: false', 'the stored hash: false', 'the stored hash: true'], 'one argon2 verification per login, a dummy one for an unknown e-mail')
    t.equal(await argon2.verify(null, 'not-a-real-password-but-the-same-cost'), false, 'a password matching the dummy hash logs nobody in')
  })

  t.test('login is rate limited per address', async (t) => {
    const attempt = (remoteAddress: string, password = 'wrong-password') => login(ta, ROOT_EMAIL, password, remoteAddress)
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await attempt('192.0.2.7')).statusCode)
    t.same(statuses, [401, 401, 401], 'three attempts are answered')
    const fourth = await attempt('192.0.2.7')
    t.equal(fourth.statusCode, 429, 'the fourth is refused')
    t.equal(fourth.json().response_code, '602')
    t.type(fourth.json().response_text, 'string')
    t.notMatch(fourth.body, /Error:|\n\s+at /)
    t.equal((await attempt('192.0.2.7', ROOT_PASSWORD)).statusCode, 429, 'even with the right password')
    t.equal((await attempt('192.0.2.8', ROOT_PASSWORD)).statusCode, 200, 'another address is not limited')
    const others: number[] = []
    for (let i = 0; i < 5; i++) others.push((await ta.call({ method: 'GET', url: '/v2/profile', remoteAddress: '192.0.2.7' })).statusCode)
    t.same(others, [200, 200, 200, 200, 200], 'the limit applies to login only')
  })

  t.test('issuer and audience, when configured, are required', async (t) => {
    const strict = await buildTestApp(t, { db, env: { JWT_ISSUER: 'https://issuer.example', JWT_AUDIENCE: 'admin-api' } })
    const status = async (extra: Claims) => (await profile(strict, sign(claimsOf(strict.root, extra), TEST_SECRET))).statusCode
    t.equal(await status({ iss: 'https://issuer.example', aud: 'admin-api' }), 200, 'the right issuer and audience')
    t.equal(await status({ iss: 'https://evil.example', aud: 'admin-api' }), 401, 'a wrong issuer')
    t.equal(await status({ iss: 'https://issuer.example', aud: 'other-api' }), 401, 'a wrong audience')
    t.equal(await status({ aud: 'admin-api' }), 401, 'no issuer')
    t.equal(await status({ iss: 'https://issuer.example' }), 401, 'no audience')
    t.equal(await status({}), 401, 'neither')
    t.equal(await status({ iss: 'https://issuer.example/', aud: 'admin-api' }), 401, 'an issuer that only looks alike')
    t.equal((await profile(ta, sign(claimsOf(ta.root), TEST_SECRET))).statusCode, 200, 'an app without them accepts tokens without them')

    const issued = await login(strict, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(issued.statusCode, 200)
    const claims = decodePayload(issued.json().data.access_token)
    t.equal(claims.iss, 'https://issuer.example', 'login tokens carry the issuer')
    t.equal(claims.aud, 'admin-api', 'and the audience')
    t.equal((await profile(strict, issued.json().data.access_token)).statusCode, 200)
  })

  for (const [type, algorithm, otherAlgorithm] of [['rsa', 'RS256', 'ES256'], ['ec', 'ES256', 'RS256']] as const) {
    t.test(`${algorithm} through JWT_PUBLIC_KEY`, async (t) => {
      const keys = keyPair(type)
      const external = await buildTestApp(t, { db, env: { JWT_SECRET: undefined, JWT_PUBLIC_KEY: keys.publicPem } })
      const status = async (token: string) => (await profile(external, token)).statusCode
      const claims = claimsOf(external.root)
      t.equal(await status(sign(claims, keys.privatePem, algorithm)), 200, `an ${algorithm} token passes`)
      t.equal(await status(sign(claimsOf(owner), keys.privatePem, algorithm)), 200, 'for merchants too')
      t.equal(await status(sign(claims, keyPair(type).privatePem, algorithm)), 401, 'signed by another key')
      t.equal(await status(sign(claims, keyPair(type === 'rsa' ? 'ec' : 'rsa').privatePem, otherAlgorithm)), 401, `an ${otherAlgorithm} token`)
      t.equal(await status(sign(claims, keys.publicPem, 'HS256')), 401, 'HS256 with the public key as secret (algorithm confusion)')
      t.equal(await status(sign(claims, TEST_SECRET, 'HS256')), 401, 'HS256 with the old shared secret')
      t.equal(await status(rawToken({ alg: 'none', typ: 'JWT' }, claims)), 401, 'alg none')
      t.equal(await status(sign(claimsOf(external.root, { exp: nowSeconds() - 30 }), keys.privatePem, algorithm)), 401, 'expired')
      const refused = await login(external, ROOT_EMAIL, ROOT_PASSWORD)
      t.equal(refused.statusCode, 400, 'no login with an external issuer')
      t.equal(refused.json().response_code, '107')
      t.notMatch(refused.body, /access_token/)
    })
  }

  t.test('keys from a JWKS', async (t) => {
    const rsa = keyPair('rsa')
    const ec = keyPair('ec')
    const jwks = await serveJwks(t, [
      { key: rsa.publicKey, kid: 'rsa-1', alg: 'RS256' },
      { key: ec.publicKey, kid: 'ec-1', alg: 'ES256' },
    ])
    const external = await buildTestApp(t, { db, env: { JWT_SECRET: undefined, JWT_JWKS_URL: jwks.url } })
    const status = async (token: string) => (await profile(external, token)).statusCode
    const claims = claimsOf(external.root)
    t.equal(await status(sign(claims, rsa.privatePem, 'RS256', 'rsa-1')), 200, 'an RS256 token with a known kid')
    t.equal(await status(sign(claims, ec.privatePem, 'ES256', 'ec-1')), 200, 'an ES256 token with a known kid')
    t.ok(jwks.fetches() >= 1, 'the key set was fetched')
    t.equal(await status(sign(claims, rsa.privatePem, 'RS256', 'rsa-2')), 401, 'an unknown kid')
    t.equal(await status(sign(claims, rsa.privatePem, 'RS256')), 401, 'no kid')
    t.equal(await status(sign(claims, keyPair('rsa').privatePem, 'RS256', 'rsa-1')), 401, 'a known kid but another key')
    t.equal(await status(sign(claims, rsa.publicPem, 'HS256', 'rsa-1')), 401, 'HS256 with the public key as secret')
    t.equal(await status(rawToken({ alg: 'none', kid: 'rsa-1' }, claims)), 401, 'alg none with a known kid')
    t.equal(await status(sign(claimsOf(external.root, { merchant_id: 'm1' }), rsa.privatePem, 'RS256', 'rsa-1')), 401, 'claims that disagree with the account')
    const refused = await login(external, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(refused.statusCode, 400, 'no login with an external issuer')
    t.equal(refused.json().response_code, '107')
  })
})
