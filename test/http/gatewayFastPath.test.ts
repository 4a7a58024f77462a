/**
 * The gateway's fast path (src/http/gatewayFastPath.ts): over HTTP, what it
 * answers is what the Fastify routes answer (status, body, the service's
 * headers, metrics), and everything it does not recognise reaches Fastify.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { gatewayFastPath } from '../../src/http/gatewayFastPath.js'
import { cachedAccount, type TokenClaims } from '../../src/http/plugins/authentication.js'
import { VerifiedTokenCache } from '../../src/http/plugins/tokenCache.js'
import { ServiceMetrics } from '../../src/http/serviceMetrics.js'
import { RouteMap } from '../../src/domain/routeMap.js'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import { buildTestApp, onboard, register } from '../helper.js'

const SERVICE_HEADERS = ['content-type', 'content-length', 'x-content-type-options', 'x-authz-user-id', 'x-authz-merchant-id'] as const
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** Status, body and the service's headers of an answer, as compared between the two paths. */
function shape(status: number, body: string, headers: (name: string) => string | undefined) {
  return { status, body, ...Object.fromEntries(SERVICE_HEADERS.map((h) => [h, headers(h)])) }
}

t.test('over HTTP the fast path answers as the routes do, and leaves the rest to them', async (t) => {
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP } })
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const grant = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } } })
  t.equal(grant.statusCode, 200)
  const authorization = `Bearer ${ta.tokenFor(clerk)}`
  await ta.app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(ta.app.server.address() as AddressInfo).port}`

  const cases: Array<{ url: string; headers?: Record<string, string>; method?: 'GET' | 'HEAD' }> = [
    { url: '/v2/authz/check?obj=orders&act=read' },
    { url: '/v2/authz/check?obj=orders&act=refund' },
    { url: '/v2/authz/check?obj=orders&act=read&domain=m2' },
    { url: '/v2/authz/check?obj=orders&act=read&lang=id' },
    { url: '/v2/authz/check?obj=orders&act=read&explain=true' },
    { url: '/v2/authz/check?obj=orders&act=read&bogus=1' },
    { url: '/v2/authz/check?obj=Orders&act=read' },
    { url: '/v2/authz/check?obj=orders' },
    { url: '/v2/authz/check?obj=orders&obj=orders&act=read' },
    { url: '/v2/authz/check?obj=orders&act=read', method: 'HEAD' },
    { url: '/v2/authz/verify?obj=orders&act=read' },
    { url: '/v2/authz/verify?obj=orders&act=refund' },
    { url: '/v2/authz/verify', headers: { 'x-authz-obj': 'orders', 'x-authz-act': 'read' } },
    { url: '/v2/authz/verify', headers: { 'x-original-method': 'GET', 'x-original-uri': '/api/orders/9' } },
    { url: '/v2/authz/verify' },
    { url: '/v2/authz/verify/api/orders/17' },
    { url: '/v2/authz/verify/api/orders/17?x=1' },
    { url: '/v2/authz/verify/api/customers' },
    { url: '/v2/authz/verify/api/orders/a%2Fb' },
    { url: '/v2/authz/verify/api/orders/..' },
  ]
  /** Decisions counted so far, all endpoints and outcomes. */
  const decisions = async (): Promise<number> => {
    const text = (await ta.app.inject({ url: '/metrics' })).body
    return text
      .split('\n')
      .filter((l) => l.startsWith('aps_decisions_total{'))
      .reduce((sum, l) => sum + Number(l.split(' ')[1]), 0)
  }
  for (const c of cases) {
    for (const [what, extra] of [
      ['with the token', { authorization }],
      ['without a token', {}],
      ['with a client request id', { authorization, 'x-request-id': 'client-7' }],
    ] as const) {
      const headers = { ...c.headers, ...extra }
      const method = c.method ?? 'GET'
      const before = await decisions()
      const viaFastify = await ta.app.inject({ method, url: c.url, headers })
      const between = await decisions()
      const viaHttp = await fetch(`${base}${c.url}`, { method, headers })
      const after = await decisions()
      const label = `${method} ${c.url} ${JSON.stringify(c.headers ?? {})} ${what}`
      t.same(
        shape(viaHttp.status, await viaHttp.text(), (h) => viaHttp.headers.get(h) ?? undefined),
        shape(viaFastify.statusCode, viaFastify.body, (h) => viaFastify.headers[h] as string | undefined),
        label,
      )
      t.equal(viaHttp.headers.get('x-policy-revision'), viaFastify.headers['x-policy-revision'], `${label}: the policy revision`)
      const echoed = viaHttp.headers.get('x-request-id') ?? ''
      if ('x-request-id' in extra) t.equal(echoed, 'client-7', `${label}: the client's id echoed`)
      else t.match(echoed, UUID, `${label}: an id of ours`)
      t.equal(after - between, between - before, `${label}: counted as the route counts it`)
    }
  }
  const metrics = await ta.app.inject({ url: '/metrics' })
  const series = metrics.body.split('\n').filter((l) => l.startsWith('aps_http_request_duration_seconds_count{method="GET",route="/v2/authz/check",status_code="200"}'))
  t.equal(series.length, 1, "the fast path records into the route's own latency series")
})

t.test('the fast path takes only the common case: a cached token, a plain query, a current policy, an answer to give', async (t) => {
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP } })
  const owner = await onboard(ta, 'm1')
  const token = ta.tokenFor(owner)
  const verified = new VerifiedTokenCache<TokenClaims>()
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as TokenClaims
  verified.set(`Bearer ${token}`, claims)
  let stale = false
  const metrics = new ServiceMetrics(ta.service.replica, () => null)
  const path = gatewayFastPath({
    ctx: ta.service,
    routeMap: new RouteMap(ta.service.config.routeMap ?? []),
    metrics,
    replica: { isStale: () => stale, revisionText: '7' },
    cachedAccount: (header) => cachedAccount(verified, ta.service.accounts, header),
  })
  // Whatever the fast path declines is answered 599 here, where Fastify would take it.
  const server: Server = createServer((request, response) => {
    if (!path(request, response)) response.writeHead(599).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const status = async (url: string, headers: Record<string, string> = { authorization: `Bearer ${token}` }, method = 'GET') =>
    (await fetch(`${base}${url}`, { method, headers })).status

  t.equal(await status('/v2/authz/check?obj=orders&act=read'), 200, 'a check, allowed or not')
  t.equal(await status('/v2/authz/verify/api/orders/1'), 200, 'the prefix form, allowed (an owner holds the pair)')
  t.equal(await status('/v2/authz/verify?obj=orders&act=read'), 204, 'verify, allowed')
  t.equal(await status('/v2/authz/check?obj=orders&act=read', { authorization: `Bearer ${ta.tokenFor(owner)}x` }), 599, 'a token not verified before')
  t.equal(await status('/v2/authz/check?obj=orders&act=read', {}), 599, 'no token')
  t.equal(await status('/v2/authz/check?obj=orders&act=read&min_revision=1'), 599, 'min_revision')
  t.equal(await status('/v2/authz/check?obj=orders&act=read&lang=id'), 599, 'lang')
  t.equal(await status('/v2/authz/check?obj=ord%65rs&act=read'), 599, 'anything to decode')
  t.equal(await status('/v2/authz/check?obj=orders&act=read', { authorization: `Bearer ${token}` }, 'HEAD'), 599, 'HEAD')
  t.equal(await status('/v2/authz/verify?obj=nothing&act=here'), 599, 'a denied forward auth: its 403 is the route\'s')
  t.equal(await status('/v2/authz/checks?obj=orders&act=read'), 599, 'another path')
  stale = true
  t.equal(await status('/v2/authz/check?obj=orders&act=read'), 599, 'a stale policy: its 903 is the route\'s')
})
