/**
 * Sessions that end: `POST /v2/auth/logout` ends the presented token (or
 * every token of the account) on every route, fast paths and forward auth
 * included, and on every replica; ended tokens are forgotten once they would
 * have expired; an external issuer's tokens (no credentials version) are
 * judged by `iat` against the account's last change of credentials.
 */
import type { AddressInfo } from 'node:net'
import { createSigner } from 'fast-jwt'
import t, { type Test } from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { insertEndedToken } from '../../src/storage/endedTokens.js'
import {
  ROOT_EMAIL,
  ROOT_PASSWORD,
  backend,
  buildTestApp,
  freshDatabase,
  onboard,
  register,
  secondConnection,
  type TestApp,
} from '../helper.js'
import { eventually } from '../support/eventually.js'
import { decodePayload, keyPair, nowSeconds } from '../support/jwt.js'
import { ManualClock } from '../support/manualClock.js'

const logout = (ta: TestApp, token: string, data: Record<string, unknown> = {}) =>
  ta.call({ method: 'POST', url: '/v2/auth/logout', token, body: { command: 'logout', data } })

/** Status and response code of a call of the caller's own profile. */
async function asProfile(ta: TestApp, token: string): Promise<{ status: number; code: string | undefined }> {
  const res = await ta.call({ method: 'GET', url: '/v2/profile', token })
  return { status: res.statusCode, code: (res.json() as { response_code?: string }).response_code }
}

const loginToken = async (ta: TestApp, email: string, password: string): Promise<string> => {
  const res = await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email, password } } })
  if (res.statusCode !== 200) throw new Error(`login failed: ${res.statusCode} ${res.body}`)
  return (res.json() as { data: { access_token: string } }).data.access_token
}

const auditCount = async (ta: TestApp, action: string, target: string): Promise<number> => {
  const { rows } = await ta.service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_audit WHERE action = $1 AND target_id = $2', [action, target])
  return rows[0]?.n ?? 0
}

t.test('each token has its own jti; logging one out leaves the others working', async (t) => {
  const ta = await buildTestApp(t)
  const first = ta.tokenFor(ta.root)
  const second = ta.tokenFor(ta.root)
  const jti = decodePayload(first).jti
  t.type(jti, 'string')
  t.ok(String(jti).length >= 22, 'at least 128 bits')
  t.not(decodePayload(second).jti, jti, 'two tokens, two ids')
  t.type(decodePayload(await loginToken(ta, ROOT_EMAIL, ROOT_PASSWORD)).jti, 'string', 'login tokens carry one too')

  const ended = await logout(ta, first)
  t.equal(ended.statusCode, 200)
  t.type((ended.json() as { data: { revision: number } }).data.revision, 'number', 'the answer carries the revision')
  t.same(await asProfile(ta, first), { status: 401, code: '204' }, 'the token is refused from then on')
  t.same(await asProfile(ta, second), { status: 200, code: '001' }, 'another token of the same account still works')
  t.equal((await logout(ta, first)).statusCode, 401, 'a logged-out token cannot log out again')
  t.equal(await auditCount(ta, 'logged_out', ta.root.id), 1, 'the logout is audited')
  const bad = await ta.call({ method: 'POST', url: '/v2/auth/logout', token: second, body: { command: 'logout', data: { everywhere: 'yes' } } })
  t.equal(bad.statusCode, 400, 'the body is validated')
  t.equal((await ta.call({ method: 'POST', url: '/v2/auth/logout', token: null, body: { command: 'logout', data: {} } })).statusCode, 401, 'a token is needed')
})

t.test('everywhere ends every token of the account, and only of that account', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const ownerToken = ta.tokenFor(owner)
  const tokens = [await loginToken(ta, ROOT_EMAIL, ROOT_PASSWORD), await loginToken(ta, ROOT_EMAIL, ROOT_PASSWORD), ta.rootToken]
  t.equal((await logout(ta, tokens[0] as string, { everywhere: true })).statusCode, 200)
  for (const [i, token] of tokens.entries()) t.equal((await asProfile(ta, token)).status, 401, `token ${i} is refused`)
  t.equal((await asProfile(ta, ownerToken)).status, 200, "another account's token still works")
  const fresh = await loginToken(ta, ROOT_EMAIL, ROOT_PASSWORD)
  t.equal((await asProfile(ta, fresh)).status, 200, 'a token issued afterwards works')
  t.equal(await auditCount(ta, 'logged_out_everywhere', ta.root.id), 1, 'audited as its own action')
})

/** m1's owner and a clerk holding orders:read in m1, the clerk's token, and the app listening on a free port (the fast paths run over HTTP only). */
async function listeningWithClerk(t: Test, ta: TestApp): Promise<{ clerk: Account; base: string }> {
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const grant = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } } })
  t.equal(grant.statusCode, 200)
  await ta.app.listen({ host: '127.0.0.1', port: 0 })
  return { clerk, base: `http://127.0.0.1:${(ta.app.server.address() as AddressInfo).port}` }
}

t.test('a logged-out token is refused by check, verify and check-batch, on the fast paths too, though verified and cached before', async (t) => {
  const ta = await buildTestApp(t)
  const { clerk, base } = await listeningWithClerk(t, ta)
  const token = ta.tokenFor(clerk)
  const other = ta.tokenFor(clerk)
  const batch = JSON.stringify({ command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }] } })
  const asks: Array<[string, (token: string) => Promise<{ status: number; code: string | undefined }>]> = [
    ['check (fast path)', (token) => overHttp(`${base}/v2/authz/check?obj=orders&act=read`, token)],
    ['verify (fast path)', (token) => overHttp(`${base}/v2/authz/verify?obj=orders&act=read`, token)],
    ['verify over HTTP, left to the route (lang)', (token) => overHttp(`${base}/v2/authz/verify?obj=orders&act=read&lang=es`, token)],
    ['check-batch (fast path)', (token) => overHttp(`${base}/v2/authz/check-batch`, token, batch)],
    ['check (route)', (token) => injected(ta, 'GET', '/v2/authz/check?obj=orders&act=read', token)],
    ['verify (route)', (token) => injected(ta, 'GET', '/v2/authz/verify?obj=orders&act=read', token)],
    ['check-batch (route)', (token) => injected(ta, 'POST', '/v2/authz/check-batch', token, batch)],
  ]
  for (const [what, ask] of asks) t.match(await ask(token), { status: what.startsWith('verify') ? 204 : 200 }, `${what}: answered before the logout`)
  t.equal((await logout(ta, token)).statusCode, 200)
  for (const [what, ask] of asks) t.same(await ask(token), { status: 401, code: '204' }, `${what}: refused after it`)
  for (const [what, ask] of asks) t.match(await ask(other), { status: what.startsWith('verify') ? 204 : 200 }, `${what}: the clerk's other token still answered`)
})

async function overHttp(url: string, token: string, body?: string): Promise<{ status: number; code: string | undefined }> {
  const res = await fetch(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body } : {}),
  })
  const text = await res.text()
  return { status: res.status, code: text === '' ? undefined : (JSON.parse(text) as { response_code?: string }).response_code }
}

async function injected(ta: TestApp, method: 'GET' | 'POST', url: string, token: string, body?: string): Promise<{ status: number; code: string | undefined }> {
  const res = await ta.call({ method, url, token, ...(body !== undefined ? { body } : {}) })
  return { status: res.statusCode, code: res.body === '' ? undefined : (res.json() as { response_code?: string }).response_code }
}

t.test('another replica over the same database refuses what one logged out', async (t) => {
  const db = await freshDatabase(t)
  // PGlite has no LISTEN: the second service learns of the logout from its reconciling poll.
  const env = { REVISION_POLL_MS: backend === 'postgres' ? '60000' : '50' }
  const a = await buildTestApp(t, { db, env })
  const b = await buildTestApp(t, { db: backend === 'postgres' ? secondConnection(t, db) : db, env })
  const one = a.tokenFor(a.root)
  const two = a.tokenFor(a.root)
  t.equal((await asProfile(b, one)).status, 200, 'the other replica accepts the token (and caches it as verified)')
  t.equal((await logout(a, one)).statusCode, 200)
  t.ok(await eventually(async () => (await asProfile(b, one)).status === 401), 'then refuses it')
  t.same(await asProfile(b, one), { status: 401, code: '204' })
  t.equal((await asProfile(b, two)).status, 200, 'and still accepts the other one')

  t.equal((await logout(b, two, { everywhere: true })).statusCode, 200, 'everywhere, through the other replica')
  t.ok(await eventually(async () => (await asProfile(a, two)).status === 401), 'the first replica refuses every token of the account')
  t.equal((await asProfile(a, await loginToken(a, ROOT_EMAIL, ROOT_PASSWORD))).status, 200, 'a token issued afterwards works there')
})

t.test('ended tokens are remembered until they would have expired, and no longer', async (t) => {
  const clock = new ManualClock(Date.now())
  const ta = await buildTestApp(t, { clock })
  const tokens = ta.service.tokens
  if (tokens === null) throw new Error('the tests sign with a secret')
  const shortLived = tokens.issue(ta.root, 60).access_token
  const longLived = tokens.issue(ta.root, 3600).access_token
  const stored = async () => (await ta.service.db.query<{ jti: string }>('SELECT jti FROM ended_tokens ORDER BY jti')).rows.map((r) => r.jti)

  t.equal((await logout(ta, shortLived)).statusCode, 200)
  t.equal(ta.service.accounts.endedTokens, 1, 'remembered in memory')
  t.same(await stored(), [decodePayload(shortLived).jti], 'and in the store')
  await ta.service.reload()
  t.equal(ta.service.accounts.endedTokens, 1, 'a reload reads it back')

  // Past the short token's expiry however long the set-up took, short of the long one's.
  clock.advance(600_000)
  t.equal((await logout(ta, longLived)).statusCode, 200)
  t.same(await stored(), [decodePayload(longLived).jti], 'the expired one is deleted from the store by the next logout')
  t.equal(ta.service.accounts.endedTokens, 1, 'and dropped from memory')
  t.same(await asProfile(ta, longLived), { status: 401, code: '204' }, 'the unexpired one is still refused')
  await insertEndedToken(ta.service.db, 'expired-not-yet-deleted', ta.root.id, new Date(clock.now() - 1000))
  await ta.service.reload()
  t.equal(ta.service.accounts.endedTokens, 1, 'a reload never reads an expired one')
})

t.test('external issuer: a token issued before the last change of credentials is refused, one issued after is accepted', async (t) => {
  const keys = keyPair('ec')
  const db = await freshDatabase(t)
  // The accounts and the merchant are made through an app that signs its own tokens, then judged by one that trusts the key.
  const local = await buildTestApp(t, { db })
  const owner = await onboard(local, 'm1')
  // The service's clock runs an hour behind, moved by hand: each change of credentials lies seconds after the last, and
  // every token's iat (a second after a change) lies in the past, as an issuer's does.
  const clock = new ManualClock(Date.now() - 3_600_000)
  const ta = await buildTestApp(t, { db, clock, env: { JWT_SECRET: undefined, JWT_PUBLIC_KEY: keys.publicPem } })
  // The issuer's tokens carry `iat` only where a case gives one (fast-jwt adds the current time otherwise, or drops a given one).
  const withIat = createSigner({ key: keys.privatePem, algorithm: 'ES256' })
  const withoutIat = createSigner({ key: keys.privatePem, algorithm: 'ES256', noTimestamp: true })
  const external = (account: Account, claims: Record<string, unknown>): string =>
    ('iat' in claims ? withIat : withoutIat)({
      sub: account.id,
      principal_type: account.principal_type,
      ...(account.merchant_id !== null ? { merchant_id: account.merchant_id } : {}),
      exp: nowSeconds() + 300,
      ...claims,
    })
  const root = external(ta.root, { iat: nowSeconds() })
  /** The instant of the owner's last change of credentials, in the seconds of `iat`. */
  const mark = async () => {
    const changed = (await ta.service.accounts.get(owner.id))?.credentials_changed_at ?? null
    if (changed === null) throw new Error('no change of credentials noted')
    return Math.floor(changed.getTime() / 1000)
  }
  const status = async (claims: Record<string, unknown>) => (await asProfile(ta, external(owner, claims))).status
  const later = () => clock.advance(10_000)

  t.equal(await status({ iat: nowSeconds() - 60 }), 200, 'nothing changed yet: an older token passes')
  t.notOk('iat' in decodePayload(external(owner, {})), 'a token without iat')
  t.equal(await status({}), 200, 'passes too')

  for (const what of ['deactivate', 'reactivate'] as const) {
    later()
    const res = await ta.call({ method: 'POST', url: `/v2/admin/accounts/${owner.id}/${what}`, token: root, body: { command: `${what}-admin`, data: {} } })
    t.equal(res.statusCode, 200, what)
  }
  let at = await mark()
  t.equal(at, Math.floor(clock.now() / 1000), 'the reactivation noted its instant')
  t.equal(await status({ iat: at - 1 }), 401, 'issued before the reactivation: refused')
  t.equal(await status({ iat: at }), 401, 'issued in the same second: refused (it cannot be told apart)')
  t.equal(await status({ iat: at + 1 }), 200, 'issued after it: accepted (was refused for good)')
  t.equal(await status({}), 401, 'without iat: refused once credentials changed')

  const beforePassword = external(owner, { iat: at + 1 })
  later()
  const password = await ta.call({
    method: 'POST',
    url: '/v2/profile/password',
    token: beforePassword,
    body: { command: 'change-password', data: { current_password: 'merchant-pass-1', new_password: 'merchant-pass-2' } },
  })
  t.equal(password.statusCode, 200, 'a password change')
  t.notOk('access_token' in (password.json() as { data: object }).data, 'hands out no token with an external issuer')
  at = await mark()
  t.equal(at, Math.floor(clock.now() / 1000), 'notes its instant')
  t.equal((await asProfile(ta, beforePassword)).status, 401, 'and refuses tokens issued before it')
  t.equal(await status({ iat: at + 1 }), 200, 'but not those after')

  const withId = external(owner, { iat: at + 1, jti: 'external-1' })
  const sibling = external(owner, { iat: at + 1, jti: 'external-2' })
  t.equal((await logout(ta, withId)).statusCode, 200, 'a logout of an external token with a jti')
  t.same(await asProfile(ta, withId), { status: 401, code: '204' }, 'ends it')
  t.equal((await asProfile(ta, sibling)).status, 200, 'and it alone')

  later()
  t.equal((await logout(ta, external(owner, { iat: at + 1 }))).statusCode, 200, 'a logout of an external token without a jti')
  t.equal((await asProfile(ta, sibling)).status, 401, 'cannot be told apart: every token issued until then is ended')
  t.equal(await status({ iat: (await mark()) + 1 }), 200, "the issuer's next token works")

  later()
  const everywhere = external(owner, { iat: (await mark()) + 1, jti: 'external-3' })
  const another = external(owner, { iat: (await mark()) + 1, jti: 'external-4' })
  t.equal((await logout(ta, everywhere, { everywhere: true })).statusCode, 200, 'everywhere with an external token')
  t.equal((await asProfile(ta, another)).status, 401, "ends the account's other tokens")
})

t.test("external issuer: one jti in two accounts' tokens is two sessions; a logout ends the caller's alone, here and after a reload", async (t) => {
  const keys = keyPair('ec')
  const db = await freshDatabase(t)
  const local = await buildTestApp(t, { db })
  const owner = await onboard(local, 'm1')
  const ta = await buildTestApp(t, { db, env: { JWT_SECRET: undefined, JWT_PUBLIC_KEY: keys.publicPem } })
  const sign = createSigner({ key: keys.privatePem, algorithm: 'ES256' })
  // An issuer that numbers its tokens per subject gives both accounts the same jti.
  const external = (account: Account): string =>
    sign({
      sub: account.id,
      principal_type: account.principal_type,
      ...(account.merchant_id !== null ? { merchant_id: account.merchant_id } : {}),
      exp: nowSeconds() + 300,
      jti: 'session-1',
    })
  const ownerToken = external(owner)
  const rootToken = external(ta.root)

  t.equal((await logout(ta, ownerToken)).statusCode, 200, "the merchant owner's logout")
  t.same(await asProfile(ta, ownerToken), { status: 401, code: '204' }, 'ends its token')
  t.equal((await asProfile(ta, rootToken)).status, 200, "and not root's token with the same jti")
  t.equal((await logout(ta, rootToken)).statusCode, 200, "root's own logout")
  t.same(await asProfile(ta, rootToken), { status: 401, code: '204' }, 'ends it too')
  const stored = await ta.service.db.query<{ account_id: string }>("SELECT account_id FROM ended_tokens WHERE jti = 'session-1' ORDER BY account_id")
  t.same(stored.rows.map((r) => r.account_id), [owner.id, ta.root.id].sort(), 'each logout is its own row')
  await ta.service.reload()
  t.same(await asProfile(ta, ownerToken), { status: 401, code: '204' }, 'after a reload the first stays ended')
  t.same(await asProfile(ta, rootToken), { status: 401, code: '204' }, 'and so does the second')
})
