/**
 * The gateway's fast path (src/http/gatewayFastPath.ts): over HTTP, what it
 * answers is what the Fastify routes answer (status, body, the service's
 * headers, metrics), and everything it does not recognise reaches Fastify.
 */
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { gatewayFastPath } from '../../src/http/gatewayFastPath.js'
import { MAX_FAST_BATCH_BYTES } from '../../src/http/checkBatchFastPath.js'
import { cachedAccount, credentialsRule, type TokenClaims } from '../../src/http/plugins/authentication.js'
import { VerifiedTokenCache } from '../../src/http/plugins/tokenCache.js'
import { ServiceMetrics } from '../../src/http/serviceMetrics.js'
import { RouteMap } from '../../src/domain/routeMap.js'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import { buildTestApp, onboard, type TestApp } from '../helper.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'

const SERVICE_HEADERS = ['content-type', 'content-length', 'x-content-type-options', 'x-authz-user-id', 'x-authz-merchant-id'] as const
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** Status, body and the service's headers of an answer, as compared between the two paths. */
function shape(status: number, body: string, headers: (name: string) => string | undefined) {
  return { status, body, ...Object.fromEntries(SERVICE_HEADERS.map((h) => [h, headers(h)])) }
}

/** Decisions counted so far, all endpoints and outcomes. */
async function decisions(ta: TestApp): Promise<number> {
  const text = (await ta.app.inject({ url: '/metrics' })).body
  return text
    .split('\n')
    .filter((l) => l.startsWith('aps_decisions_total{'))
    .reduce((sum, l) => sum + Number(l.split(' ')[1]), 0)
}

type Compared = { method: 'GET' | 'HEAD' | 'POST'; url: string; headers: Record<string, string>; body?: string }

/**
 * One request both ways, Fastify's route (inject) then the server over
 * HTTP: the same status, body, service headers, revision and metrics.
 */
async function compareBothWays(t: Test, ta: TestApp, base: string, { method, url, headers, body }: Compared, label: string): Promise<void> {
  const before = await decisions(ta)
  const viaFastify = await ta.app.inject({ method, url, headers, ...(body !== undefined ? { payload: body } : {}) })
  const between = await decisions(ta)
  const viaHttp = await fetch(`${base}${url}`, { method, headers, ...(body !== undefined ? { body } : {}) })
  const after = await decisions(ta)
  t.same(
    shape(viaHttp.status, await viaHttp.text(), (h) => viaHttp.headers.get(h) ?? undefined),
    shape(viaFastify.statusCode, viaFastify.body, (h) => viaFastify.headers[h] as string | undefined),
    label,
  )
  t.equal(viaHttp.headers.get('x-policy-revision'), viaFastify.headers['x-policy-revision'], `${label}: the policy revision`)
  const echoed = viaHttp.headers.get('x-request-id') ?? ''
  if ('x-request-id' in headers) t.equal(echoed, headers['x-request-id'], `${label}: the client's id echoed`)
  else t.match(echoed, UUID, `${label}: an id of ours`)
  t.equal(after - between, between - before, `${label}: counted as the route counts it`)
}

/** The three ways every case is sent: with the token, without one, with a client request id. */
const callerVariants = (authorization: string) =>
  [
    ['with the token', { authorization }],
    ['without a token', {}],
    ['with a client request id', { authorization, 'x-request-id': 'client-7' }],
  ] as const

t.test('over HTTP the fast path answers as the routes do, and leaves the rest to them', async (t) => {
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP } })
  const { authorization, base } = await listeningWithClerk(t, ta)

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
  for (const c of cases) {
    for (const [what, extra] of callerVariants(authorization)) {
      const method = c.method ?? 'GET'
      await compareBothWays(t, ta, base, { method, url: c.url, headers: { ...c.headers, ...extra } }, `${method} ${c.url} ${JSON.stringify(c.headers ?? {})} ${what}`)
    }
  }
  const metrics = await ta.app.inject({ url: '/metrics' })
  const series = metrics.body.split('\n').filter((l) => l.startsWith('aps_http_request_duration_seconds_count{method="GET",route="/v2/authz/check",status_code="200"}'))
  t.equal(series.length, 1, "the fast path records into the route's own latency series")
})

/** A check-batch body of `checks`, with `data`'s other members. */
const batchBody = (checks: unknown, data: Record<string, unknown> = {}) => JSON.stringify({ command: 'check-batch', data: { ...data, checks } })
const mixed = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ obj: i % 2 === 0 ? 'orders' : 'payouts', act: i % 3 === 0 ? 'read' : 'approve', ...(i % 5 === 0 ? {} : { domain: i % 7 === 0 ? 'm2' : 'm1' }) }))

t.test('over HTTP check-batch answers as its route does, whichever path takes it', async (t) => {
  const ta = await buildTestApp(t)
  const { owner, clerk, authorization, base } = await listeningWithClerk(t, ta)
  const longest = `o${'a'.repeat(63)}`
  const bodies: Array<[string, string]> = [
    ['allowed, denied, domain given or not', batchBody([{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'refund', domain: 'm1' }, { obj: 'orders', act: 'read', domain: 'm2' }])],
    ['100 checks', batchBody(mixed(100))],
    ['101 checks', batchBody(mixed(101))],
    ['no checks', batchBody([])],
    ['pretty-printed', JSON.stringify({ command: 'check-batch', data: { checks: mixed(3) } }, null, 2)],
    ['members in another order', JSON.stringify({ data: { checks: [{ domain: 'm1', act: 'read', obj: 'orders' }] }, command: 'check-batch' })],
    ['an invalid item', batchBody([{ obj: 'orders', act: 'read' }, { obj: 'Orders', act: 'read' }])],
    ['an item without act', batchBody([{ obj: 'orders' }])],
    ['a number for obj', batchBody([{ obj: 5, act: 'read' }])],
    ['checks not an array', batchBody({ obj: 'orders', act: 'read' })],
    ['an item not an object', batchBody(['orders:read'])],
    ['an extra property in an item', batchBody([{ obj: 'orders', act: 'read', why: 1 }])],
    ['an extra property in data', batchBody([{ obj: 'orders', act: 'read' }], { note: 'x' })],
    ['an extra property at the top', JSON.stringify({ command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }] }, x: 1 })],
    ['another command', JSON.stringify({ command: 'check', data: { checks: [{ obj: 'orders', act: 'read' }] } })],
    ['no command', JSON.stringify({ data: { checks: [{ obj: 'orders', act: 'read' }] } })],
    ['unicode in a value', batchBody([{ obj: 'ordérs', act: 'read' }])],
    ['an escaped value', '{"command":"check-batch","data":{"checks":[{"obj":"ord\\u0065rs","act":"read"}]}}'],
    ['an escaped key', '{"command":"check-batch","data":{"checks":[{"\\u006fbj":"orders","act":"read"}]}}'],
    ['a duplicated key in an item', '{"command":"check-batch","data":{"checks":[{"obj":"payouts","obj":"orders","act":"read"}]}}'],
    ['a duplicated command', '{"command":"nothing","command":"check-batch","data":{"checks":[{"obj":"orders","act":"read"}]}}'],
    ['a duplicated data', '{"command":"check-batch","data":{"checks":[{"obj":"orders","act":"refund"}]},"data":{"checks":[{"obj":"orders","act":"read"}]}}'],
    ['the longest identifier', batchBody([{ obj: longest, act: 'read' }])],
    ['one character too long', batchBody([{ obj: `${longest}a`, act: 'read' }])],
    ['a domain in capitals', batchBody([{ obj: 'orders', act: 'read', domain: 'M1' }])],
    ['a malformed domain', batchBody([{ obj: 'orders', act: 'read', domain: '-m1' }])],
    ['explain', batchBody([{ obj: 'orders', act: 'read' }], { explain: true })],
    ['explain false', batchBody([{ obj: 'orders', act: 'read' }], { explain: false })],
    ['user_id', batchBody([{ obj: 'orders', act: 'read' }], { user_id: owner.id })],
    ['min_revision', batchBody([{ obj: 'orders', act: 'read' }], { min_revision: 0 })],
    ['__proto__', '{"command":"check-batch","data":{"checks":[{"obj":"orders","act":"read"}]},"__proto__":{"x":1}}'],
    ['text after the object', `${batchBody([{ obj: 'orders', act: 'read' }])} x`],
    ['two objects', `${batchBody([{ obj: 'orders', act: 'read' }])}${batchBody([{ obj: 'orders', act: 'read' }])}`],
    ['a truncated body', batchBody([{ obj: 'orders', act: 'read' }]).slice(0, -2)],
    ['not JSON', 'orders:read'],
    ['an empty object', '{}'],
    ['a NUL byte', batchBody([{ obj: 'orders\u0000', act: 'read' }])],
  ]
  const ways: Array<[string, string, Record<string, string>]> = [
    ['', '/v2/authz/check-batch', { 'content-type': 'application/json' }],
    [' (charset)', '/v2/authz/check-batch', { 'content-type': 'application/json; charset=utf-8' }],
    [' (lang)', '/v2/authz/check-batch?lang=id', { 'content-type': 'application/json' }],
  ]
  for (const [what, body] of bodies) {
    for (const [how, url, type] of ways) {
      for (const [who, extra] of callerVariants(authorization)) {
        await compareBothWays(t, ta, base, { method: 'POST', url, headers: { ...type, ...extra }, body }, `check-batch: ${what}${how} ${who}`)
      }
    }
  }
  const valid = batchBody(mixed(4))
  for (const [what, type] of [
    ['text/plain', 'text/plain'],
    ['another charset', 'application/json; charset=latin1'],
    ['capitals', 'Application/JSON'],
  ]) {
    await compareBothWays(t, ta, base, { method: 'POST', url: '/v2/authz/check-batch', headers: { 'content-type': type as string, authorization }, body: valid }, `check-batch: ${what}`)
  }
  await compareBothWays(t, ta, base, { method: 'POST', url: '/v2/authz/check-batch', headers: { 'content-type': 'application/json', authorization }, body: '' }, 'check-batch: an empty body')
  const series = (await ta.app.inject({ url: '/metrics' })).body
    .split('\n')
    .filter((l) => l.startsWith('aps_http_request_duration_seconds_count{method="POST",route="/v2/authz/check-batch",status_code="200"}'))
  t.equal(series.length, 1, "the fast path records into the route's own latency series")

  // A token whose account was deactivated since: both paths refuse it alike.
  const off = await ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk.id}/deactivate`, token: ta.tokenFor(owner), body: { command: 'deactivate-admin', data: {} } })
  t.equal(off.statusCode, 200)
  await compareBothWays(t, ta, base, { method: 'POST', url: '/v2/authz/check-batch', headers: { 'content-type': 'application/json', authorization }, body: valid }, 'check-batch: a revoked token')
})

t.test('the fast path takes only the common case: a cached token, a plain query, a current policy, an answer to give', async (t) => {
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP } })
  const owner = await onboard(ta, 'm1')
  const token = ta.tokenFor(owner)
  const verified = new VerifiedTokenCache<TokenClaims>()
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as TokenClaims
  verified.set(`Bearer ${token}`, claims)
  let stale = false
  let stopping = false
  const metrics = new ServiceMetrics(ta.service.replica, () => null)
  const path = gatewayFastPath({
    ctx: ta.service,
    routeMap: new RouteMap(ta.service.config.routeMap ?? []),
    metrics,
    replica: { isStale: () => stale, revisionText: '7' },
    cachedAccount: (header) => cachedAccount(verified, ta.service.accounts, credentialsRule('secret'), header),
    stopping: () => stopping,
    recorder: ta.service.decisionLog,
  })
  // Whatever the fast path declines is answered 599 here, where Fastify would take it, with the body Fastify would read.
  const server: Server = createServer((request, response) => {
    const toFastify = () => {
      const chunks: Buffer[] = []
      request.on('data', (chunk: Buffer) => chunks.push(chunk))
      request.on('end', () => response.writeHead(599).end(Buffer.concat(chunks)))
      // As Fastify's body parsers do: a body given back is given back paused.
      request.resume()
    }
    if (!path(request, response, toFastify)) toFastify()
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

  /** A check-batch sent in `parts` (a pause after each but the last, where `between` runs), answered: status and body. */
  const post = (parts: string[], headers: Record<string, string | number> = {}, between: () => void = () => {}) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      // A chunked body says no length.
      const framing = 'transfer-encoding' in headers ? {} : { 'content-length': parts.reduce((sum, part) => sum + Buffer.byteLength(part), 0) }
      const request = httpRequest(`${base}/v2/authz/check-batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...framing, ...headers },
      })
      request.on('response', (response) => {
        const chunks: Buffer[] = []
        response.on('data', (chunk: Buffer) => chunks.push(chunk))
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }))
      })
      request.on('error', reject)
      const send = (i: number) => {
        if (i === parts.length - 1) return request.end(parts[i])
        request.write(parts[i])
        setTimeout(() => {
          between()
          send(i + 1)
        }, 50)
      }
      send(0)
    })
  const body = batchBody(mixed(10))
  const halves = [body.slice(0, 40), body.slice(40)]
  t.equal((await post([body])).status, 200, 'check-batch in the plain form')
  t.equal((await post(halves)).status, 200, 'check-batch in the plain form, in two parts')
  const invalid = batchBody([{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'Read' }])
  t.same(await post([invalid]), { status: 599, body: invalid }, 'an invalid check: the body given back whole to the route')
  t.same(await post(halves, {}, () => (stale = true)), { status: 599, body }, 'the policy gone stale while the body arrived')
  stale = false
  t.same(await post(halves, {}, () => (stopping = true)), { status: 599, body }, 'a stop begun while the body arrived')
  stopping = false
  const spaced = `${body}${' '.repeat(MAX_FAST_BATCH_BYTES)}`
  t.ok(Buffer.byteLength(spaced) > MAX_FAST_BATCH_BYTES)
  t.same(await post([spaced]), { status: 599, body: spaced }, 'a body past the bound: not read here')
  t.same(await post([body], { 'content-type': 'text/plain' }), { status: 599, body }, 'another content type')
  t.same(await post([body], { authorization: `Bearer ${token}x` }), { status: 599, body }, 'a token not verified before')
  t.same(await post([body], { 'transfer-encoding': 'chunked' }), { status: 599, body }, 'a body of unknown length')
  // A client gone half way: nothing to answer, and the server goes on.
  await new Promise<void>((resolve) => {
    const request = httpRequest(`${base}/v2/authz/check-batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    })
    request.on('error', () => resolve())
    request.write(body.slice(0, 40), () => setTimeout(() => {
      request.destroy()
      resolve()
    }, 50))
  })
  t.equal((await post([body])).status, 200, 'answers after a client left half way')

  stale = true
  t.equal(await status('/v2/authz/check?obj=orders&act=read'), 599, 'a stale policy: its 903 is the route\'s')
  t.same(await post([body]), { status: 599, body }, 'check-batch on a stale policy')
})
