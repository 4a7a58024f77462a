/**
 * Forward auth on paths the route map and an upstream could read
 * differently: a user who may read products but not customers asks about
 * `/products/..;/customers/1`, `/products/..%20/customers/1` and their kin,
 * through X-Original-URI, X-Forwarded-Uri (by the route and over a socket,
 * where the gateway's fast path sees them first) and the prefix form, and is
 * refused with 403 `303` every time, never allowed. The refusal is logged with its reason and request id.
 */
import { writeFileSync } from 'node:fs'
import type { OutgoingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, buildTestApp, onboard, register, tempDir } from '../helper.js'
import { AMBIGUOUS_PATHS, AMBIGUOUS_PATH_ROUTES } from '../support/ambiguousPaths.js'
import { errorShapeProblems } from '../support/envelope.js'
import { sendRaw, type RawAnswer } from '../support/rawRequest.js'
import { LOG_LEVELS, processDatabase, startServer } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('path normalisation before the route map')

const ROUTES = AMBIGUOUS_PATH_ROUTES

function routeMapFile(t: Parameters<typeof tempDir>[0]): string {
  const file = join(tempDir(t), 'routes.json')
  writeFileSync(file, JSON.stringify(ROUTES))
  return file
}

interface Answer {
  statusCode: number
  headers: OutgoingHttpHeaders
  body: string
}

const fromRaw = (res: RawAnswer): Answer => ({ statusCode: res.status, headers: res.headers, body: res.body })

/** The envelope's `response_code`; none for an empty answer (an allow). */
function responseCode(res: Answer): string | undefined {
  try {
    return (JSON.parse(res.body) as { response_code?: string }).response_code
  } catch {
    return undefined
  }
}

t.test('ambiguous original paths are refused, never allowed', async (t) => {
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: routeMapFile(t) } })
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const grant = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    body: { command: 'grant-role-permission', data: { obj: 'products', act: 'read', domain: 'm1' } },
  })
  t.equal(grant.statusCode, 200)
  const authorization = `Bearer ${ta.tokenFor(clerk)}`
  await ta.app.listen({ port: 0, host: '127.0.0.1' })
  const port = (ta.app.server.address() as AddressInfo).port

  const viaHeader = (name: 'x-original-uri' | 'x-forwarded-uri', uri: string): Promise<Answer> => {
    const method = name === 'x-original-uri' ? 'x-original-method' : 'x-forwarded-method'
    return ta.app.inject({ method: 'GET', url: '/v2/authz/verify', headers: { authorization, [method]: 'GET', [name]: uri } })
  }
  // Over a socket the gateway's fast path sees each request first (gatewayFastPath.ts); the injector reaches the route only.
  const viaHeaderOverSocket = async (name: 'x-original-uri' | 'x-forwarded-uri', uri: string): Promise<Answer> => {
    const method = name === 'x-original-uri' ? 'x-original-method' : 'x-forwarded-method'
    return fromRaw(await sendRaw(port, 'GET', '/v2/authz/verify', { authorization, [method]: 'GET', [name]: uri }))
  }
  // The injector would parse the target as a URL (resolving `..`, reading `\` as `/`): the prefix form goes over a socket.
  const viaPrefix = async (path: string): Promise<Answer> => fromRaw(await sendRaw(port, 'GET', `/v2/authz/verify${path}`, { authorization }))
  const refused = (res: Answer, what: string, code = '303', status = 403) => {
    t.equal(res.statusCode, status, `${what}: ${status}`)
    t.equal(responseCode(res), code, `${what}: ${code}`)
    t.same(errorShapeProblems(res), [], `${what}: an envelope`)
    t.equal(res.headers['x-authz-user-id'], undefined, `${what}: no identity for the upstream`)
  }

  // The user and the map as the refusals assume them: products allowed, customers not.
  t.equal((await viaHeader('x-original-uri', '/products/1')).statusCode, 204, 'X-Original-URI: a product is allowed')
  t.equal((await viaHeader('x-forwarded-uri', '/products/a/b?x=1')).statusCode, 204, 'X-Forwarded-Uri: a product is allowed')
  t.equal((await viaPrefix('/products/1?x=%2e%2e')).statusCode, 200, 'prefix form: a product is allowed')
  t.equal((await viaHeaderOverSocket('x-original-uri', '/products/1')).statusCode, 204, 'X-Original-URI over a socket: a product is allowed')
  t.equal((await viaHeaderOverSocket('x-forwarded-uri', '/products/v1.2/file.json')).statusCode, 204, 'X-Forwarded-Uri over a socket: dots inside segments are fine')
  t.equal((await viaPrefix('/products/a%20b/.well-known')).statusCode, 200, 'prefix form: a space inside a segment, a dot in front of one are fine')
  refused(await viaHeader('x-original-uri', '/customers/1'), 'X-Original-URI: a customer', '300')
  refused(await viaPrefix('/customers/1'), 'prefix form: a customer', '300')

  for (const { path, reason, header, requestLine } of AMBIGUOUS_PATHS) {
    const what = `${JSON.stringify(path)} (${reason})`
    if (header) {
      refused(await viaHeader('x-original-uri', path), `X-Original-URI ${what}`)
      refused(await viaHeader('x-forwarded-uri', path), `X-Forwarded-Uri ${what}`)
      refused(await viaHeaderOverSocket('x-original-uri', path), `X-Original-URI over a socket ${what}`)
      refused(await viaHeaderOverSocket('x-forwarded-uri', path), `X-Forwarded-Uri over a socket ${what}`)
    }
    // A broken escape in the target itself is refused by the router, before any route.
    if (requestLine && reason === 'invalid-escape') refused(await viaPrefix(path), `prefix form ${what}`, '604', 400)
    else if (requestLine) refused(await viaPrefix(path), `prefix form ${what}`)
  }
})

t.test('the refusal is logged with its reason and the request id', async (t) => {
  const db = await processDatabase(t)
  const env = {
    DATABASE_URL: db.url,
    JWT_SECRET: TEST_SECRET,
    BOOTSTRAP_ADMIN_EMAIL: ROOT_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: ROOT_PASSWORD,
    ROUTE_MAP_PATH: routeMapFile(t),
  }
  const server = await startServer(t, { env, name: 'service' })
  const login = await fetch(`${server.base}/v2/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'login', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } }),
  })
  const { access_token: token } = ((await login.json()) as { data: { access_token: string } }).data
  const res = await sendRaw(server.port, 'GET', '/v2/authz/verify', { authorization: `Bearer ${token}`, 'x-original-method': 'GET', 'x-original-uri': '/products/..;/customers/1' })
  t.equal(res.status, 403, 'refused even for the system owner, who may read customers')
  t.equal(responseCode(fromRaw(res)), '303')
  const requestId = res.headers['x-request-id']
  t.type(requestId, 'string')
  const line = await server.waitForLog((l) => l.reqId === requestId && l.reason === 'semicolon', 10_000)
  t.equal(line.level, LOG_LEVELS.warn, 'at warn')
  t.match(line.msg, /ambiguous original path \(semicolon\)/)
})
