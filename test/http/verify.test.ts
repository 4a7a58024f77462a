/**
 * Forward auth for proxies: the caller's own token and a
 * pair from the query, the X-Authz-* headers or the route map applied to the
 * original request; 204 with identity headers when allowed, 403 `300` when
 * not (also when nothing names a pair), 401 without a valid token, never the
 * database.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../../src/config.js'
import { loadConfig } from '../../src/startup.js'
import { RouteMap } from '../../src/domain/routeMap.js'
import { buildTestApp, onboard, register, tempDir, testConfig } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('forward auth answers from memory, never the database')

const ROUTES = [
  { method: 'GET', path: '/orders', obj: 'orders', act: 'read' },
  { method: 'GET', path: '/orders/:id', obj: 'orders', act: 'read' },
  { method: 'POST', path: '/orders/:id/refund', obj: 'orders', act: 'refund' },
  { method: 'GET', path: '/merchants/:merchant/payouts/*', obj: 'payouts', act: 'read', domain: ':merchant' },
  { method: '*', path: '/reports/*', obj: 'reports', act: 'read' },
]

t.test('forward auth', async (t) => {
  const dir = tempDir(t)
  const mapFile = join(dir, 'routes.json')
  writeFileSync(mapFile, JSON.stringify(ROUTES))
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: mapFile } })
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  for (const [obj, act] of [
    ['orders', 'read'],
    ['payouts', 'read'],
  ]) {
    const res = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj, act, domain: 'm1' } } })
    t.equal(res.statusCode, 200)
  }
  const token = ta.tokenFor(clerk)
  const verify = (url: string, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET', bearer: string | null = token) =>
    ta.app.inject({ method, url, headers: { ...(bearer !== null ? { authorization: `Bearer ${bearer}` } : {}), ...headers } })
  const allowed = (res: Awaited<ReturnType<typeof verify>>, what: string) => {
    t.equal(res.statusCode, 204, `${what}: 204`)
    t.equal(res.body, '', `${what}: no body`)
    t.equal(res.headers['x-authz-user-id'], clerk.id, `${what}: the user for the upstream`)
    t.equal(res.headers['x-authz-merchant-id'], 'm1', `${what}: its merchant`)
  }
  const denied = (res: Awaited<ReturnType<typeof verify>>, what: string, status = 403, code = '300') => {
    t.equal(res.statusCode, status, `${what}: ${status}`)
    t.equal((res.json() as { response_code: string }).response_code, code, `${what}: ${code}`)
    t.same(errorShapeProblems(res), [], `${what}: an envelope`)
    t.equal(res.headers['x-authz-user-id'], undefined, `${what}: no identity for the upstream`)
  }

  allowed(await verify('/v2/authz/verify?obj=orders&act=read'), 'query')
  allowed(await verify('/v2/authz/verify?obj=orders&act=read', {}, 'HEAD'), 'HEAD')
  denied(await verify('/v2/authz/verify?obj=orders&act=refund'), 'query, not held')
  denied(await verify('/v2/authz/verify?obj=orders&act=read&domain=m2'), 'query, another merchant')
  denied(await verify('/v2/authz/verify?obj=orders&act=read', {}, 'GET', null), 'no token', 401, '200')
  denied(await verify('/v2/authz/verify?obj=orders&act=read', {}, 'GET', 'not.a.token'), 'bad token', 401, '201')

  allowed(await verify('/v2/authz/verify', { 'x-authz-obj': 'orders', 'x-authz-act': 'read' }), 'headers')
  allowed(await verify('/v2/authz/verify', { 'x-authz-obj': 'payouts', 'x-authz-act': 'read', 'x-authz-domain': 'm1' }), 'headers with domain')
  denied(await verify('/v2/authz/verify', { 'x-authz-obj': 'orders', 'x-authz-act': 'refund' }), 'headers, not held')
  denied(await verify('/v2/authz/verify', { 'x-authz-obj': 'orders,*', 'x-authz-act': 'read' }), 'headers, malformed')

  const original = (method: string, uri: string) => verify('/v2/authz/verify', { 'x-original-method': method, 'x-original-uri': uri })
  allowed(await original('GET', '/orders'), 'route map: list')
  allowed(await original('GET', '/orders/123?expand=items'), 'route map: one order, query ignored')
  allowed(await original('get', '/orders/123/'), 'route map: method case and a trailing slash')
  allowed(await original('GET', '/merchants/m1/payouts/2026/11'), 'route map: domain from the path, rest segment')
  allowed(await verify('/v2/authz/verify', { 'x-forwarded-method': 'GET', 'x-forwarded-uri': '/orders/9' }), 'route map: X-Forwarded-*')
  denied(await original('POST', '/orders/123/refund'), 'route map: refund not held')
  denied(await original('GET', '/merchants/m2/payouts/x'), 'route map: another merchant in the path')
  denied(await original('DELETE', '/orders/123'), 'route map: no entry for the method')
  denied(await original('GET', '/customers'), 'route map: no entry')
  denied(await original('GET', '/orders/123/../../reports/x'), 'route map: dot segments', 403, '303')
  denied(await original('GET', '/orders/a%2Fb'), 'route map: an encoded slash', 403, '303')
  denied(await original('GET', '/orders/%E0%A4%A'), 'route map: a broken escape', 403, '303')
  denied(await verify('/v2/authz/verify'), 'nothing names a pair')

  // Prefix form (Envoy ext_authz over HTTP): the client's method and path after the prefix, 200 when allowed.
  const prefixed = (method: 'GET' | 'POST' | 'DELETE', path: string, headers: Record<string, string> = {}) =>
    ta.app.inject({ method, url: `/v2/authz/verify${path}`, headers: { authorization: `Bearer ${token}`, ...headers } })
  const ok = await prefixed('GET', '/orders/42?min_revision=999999&obj=orders&act=refund')
  t.equal(ok.statusCode, 200, "prefix form: allowed is 200 (the client's query is not ours: no min_revision wait, no pair)")
  t.equal(ok.body, '')
  t.equal(ok.headers['x-authz-user-id'], clerk.id)
  t.equal((await prefixed('GET', '/merchants/m1/payouts/2026')).statusCode, 200, 'prefix form: domain from the path')
  denied(await prefixed('POST', '/orders/42/refund'), 'prefix form: refund not held')
  denied(await prefixed('DELETE', '/orders/42'), 'prefix form: no entry for the method')
  denied(await prefixed('GET', '/customers', { 'x-authz-obj': 'orders', 'x-authz-act': 'read' }), 'prefix form: headers cannot name the pair')

  // The gateway's path never waits on the database.
  await ta.service.db.close()
  allowed(await verify('/v2/authz/verify?obj=orders&act=read'), 'with the database closed')
  allowed(await original('GET', '/orders/1'), 'route map with the database closed')
  t.equal((await prefixed('GET', '/orders/1')).statusCode, 200, 'prefix form with the database closed')
})

t.test('without a route map, only the query and headers name a pair', async (t) => {
  const ta = await buildTestApp(t)
  const res = await ta.app.inject({
    method: 'GET',
    url: '/v2/authz/verify',
    headers: { authorization: `Bearer ${ta.rootToken}`, 'x-original-method': 'GET', 'x-original-uri': '/orders' },
  })
  t.equal(res.statusCode, 403)
  const root = await ta.app.inject({ method: 'GET', url: '/v2/authz/verify?obj=orders&act=read', headers: { authorization: `Bearer ${ta.rootToken}` } })
  t.equal(root.statusCode, 204, 'the system-owner super_admin may do anything')
  t.equal(root.headers['x-authz-merchant-id'], undefined, 'a system-owner user has no merchant header')
})

t.test('the route map file is checked at start-up', async (t) => {
  const dir = tempDir(t)
  const write = (name: string, content: string) => {
    const file = join(dir, name)
    writeFileSync(file, content)
    return file
  }
  const bad: Array<[string, RegExp]> = [
    ['{not json', /cannot read .* as JSON/],
    [JSON.stringify([{ method: 'GET', path: 'orders', obj: 'orders', act: 'read' }]), /ROUTE_MAP_PATH/],
    [JSON.stringify([{ method: 'GET', path: '/orders', obj: 'Orders!', act: 'read' }]), /\/0\/obj/],
    [JSON.stringify([{ method: 'GET', path: '/orders', obj: 'orders', act: 'read', extra: 1 }]), /ROUTE_MAP_PATH/],
    [JSON.stringify([{ method: 'GET', path: '/m/:merchant', obj: 'orders', act: 'read', domain: ':shop' }]), /domain :shop names no parameter/],
  ]
  for (const [i, [content, message]] of bad.entries()) {
    t.throws(() => loadConfig({ ...testEnv(), ROUTE_MAP_PATH: write(`bad${i}.json`, content) }), ConfigError)
    t.throws(() => loadConfig({ ...testEnv(), ROUTE_MAP_PATH: write(`bad${i}.json`, content) }), message)
  }
  t.throws(() => loadConfig({ ...testEnv(), ROUTE_MAP_PATH: join(dir, 'missing.json') }), /cannot read/)
  t.same(testConfig({ ROUTE_MAP_PATH: write('good.json', JSON.stringify(ROUTES)) }).routeMap, ROUTES)
  t.equal(new RouteMap(ROUTES).size, ROUTES.length)
})

function testEnv(): Record<string, string> {
  return { DATABASE_URL: 'pglite://memory', JWT_SECRET: 'a-secret-long-enough-0123' }
}
