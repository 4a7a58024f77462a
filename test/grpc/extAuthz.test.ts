/**
 * Envoy's ext_authz over gRPC (h2c), asked as Envoy asks: the client's
 * token in the request's lower-cased `authorization` header, the pair from
 * the route map applied to the request's method and path (with its query),
 * with verify's normalisation and refusals. Every field of the answer.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { status } from '@grpc/grpc-js'
import { buildTestApp, onboard, register, tempDir } from '../helper.js'
import { AMBIGUOUS_PATHS, AMBIGUOUS_PATH_ROUTES } from '../support/ambiguousPaths.js'
import { envoyCheckRequest, startTestGrpc, unary } from '../support/grpcClient.js'

interface HeaderOption {
  header: { key: string; value: string }
  append_action?: number
}
interface CheckResponse {
  status: { code?: number; message?: string }
  http_response?: string
  ok_response?: { headers?: HeaderOption[]; headers_to_remove?: string[] }
  denied_response?: { status: { code: number }; headers?: HeaderOption[]; body: string }
}

const ROUTES = [...AMBIGUOUS_PATH_ROUTES, { method: 'POST', path: '/merchants/:merchant/orders/:id/refund', obj: 'orders', act: 'refund', domain: ':merchant' }]

const headersOf = (options: HeaderOption[] | undefined): Record<string, string> => Object.fromEntries((options ?? []).map((o) => [o.header.key, o.header.value]))

async function world(t: Test) {
  const file = join(tempDir(t), 'routes.json')
  writeFileSync(file, JSON.stringify(ROUTES))
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: file } })
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const grant = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'products', act: 'read', domain: 'm1' } } })
  t.equal(grant.statusCode, 200)
  let stale = false
  const grpc = await startTestGrpc(t, ta.service, {
    decisionId: (() => {
      let n = 0
      return () => `d-${++n}`
    })(),
    replica: { isStale: () => stale, get revisionText() { return ta.service.replica.revisionText } },
  })
  const check = (method: string, path: string, headers: Record<string, string> = {}) => unary<CheckResponse>(grpc.extAuthz, 'Check', envoyCheckRequest(method, path, headers))
  return {
    ta,
    clerk,
    token: ta.tokenFor(clerk),
    grpc,
    check,
    setStale: (value: boolean) => (stale = value),
  }
}

t.test('allowed: OK with the identity and decision id for the upstream', async (t) => {
  const w = await world(t)
  const res = await w.check('GET', '/products/42?expand=price&obj=customers&act=read', { authorization: `Bearer ${w.token}` })
  t.equal(res.error, null, 'the call itself succeeds')
  t.equal(res.response?.status.code ?? 0, status.OK, 'status OK')
  t.equal(res.response?.http_response, 'ok_response')
  t.equal(res.response?.denied_response, undefined)
  t.same(headersOf(res.response?.ok_response?.headers), { 'x-authz-user-id': w.clerk.id, 'x-authz-merchant-id': 'm1', 'x-decision-id': 'd-1' })
  t.ok(res.response?.ok_response?.headers?.every((h) => h.append_action === 2), 'each header replaces one the client sent')
  t.same(res.response?.ok_response?.headers_to_remove ?? [], [], 'a merchant user sends both identity headers, nothing to remove')

  const root = await w.check('GET', '/customers/7', { authorization: `Bearer ${w.ta.rootToken}` })
  t.equal(root.response?.status.code ?? 0, status.OK, 'root reads customers')
  t.same(headersOf(root.response?.ok_response?.headers), { 'x-authz-user-id': w.ta.root.id, 'x-decision-id': 'd-2' }, 'no merchant id for a system-owner user')
  t.same(root.response?.ok_response?.headers_to_remove, ['x-authz-merchant-id'], 'a client-sent merchant id never reaches the upstream')
})

t.test('refused: the status, and the HTTP answer Envoy gives the client', async (t) => {
  const w = await world(t)
  const bearer = { authorization: `Bearer ${w.token}` }
  const denied = async (res: Awaited<ReturnType<typeof w.check>>, what: string, grpcStatus: number, http: number, code: string) => {
    t.equal(res.error, null, `${what}: the call itself succeeds (a refusal is never a failed call)`)
    t.equal(res.response?.status.code, grpcStatus, `${what}: status ${grpcStatus}`)
    t.equal(res.response?.http_response, 'denied_response', `${what}: denied_response`)
    t.equal(res.response?.denied_response?.status.code, http, `${what}: HTTP ${http}`)
    const body = JSON.parse(res.response?.denied_response?.body ?? '{}') as { response_code: string; response_text: string }
    t.equal(body.response_code, code, `${what}: envelope ${code}`)
    t.equal(res.response?.status.message, body.response_text, `${what}: the status message is the text`)
    const headers = headersOf(res.response?.denied_response?.headers)
    t.equal(headers['content-type'], 'application/json; charset=utf-8', `${what}: JSON`)
    t.match(headers['x-decision-id'], /^d-\d+$/, `${what}: a decision id`)
    t.equal(res.response?.ok_response, undefined, `${what}: no ok_response`)
    return body
  }
  await denied(await w.check('GET', '/customers/7', bearer), 'not held', status.PERMISSION_DENIED, 403, '300')
  await denied(await w.check('DELETE', '/products/1', bearer), 'no route for the method', status.PERMISSION_DENIED, 403, '300')
  await denied(await w.check('GET', '/nowhere', bearer), 'no route', status.PERMISSION_DENIED, 403, '300')
  await denied(await w.check('GET', '/products/1'), 'no token', status.UNAUTHENTICATED, 401, '200')
  await denied(await w.check('GET', '/products/1', { authorization: 'Bearer a.b.c' }), 'a bad token', status.UNAUTHENTICATED, 401, '201')
  await denied(await w.check('GET', '/products/1', { authorization: 'Basic dXNlcjpwYXNz' }), 'not bearer', status.UNAUTHENTICATED, 401, '201')
  const es = await denied(await w.check('GET', '/customers/7', { ...bearer, 'accept-language': 'es-ES,es;q=0.9' }), 'in Spanish', status.PERMISSION_DENIED, 403, '300')
  t.match(es.response_text, /permiso/, 'localised by accept-language')
  const en = await denied(await w.check('GET', '/customers/7', bearer), 'default locale', status.PERMISSION_DENIED, 403, '300')
  t.not(en.response_text, es.response_text)
  await denied(await w.check('', '/products/1', bearer), 'no method', status.INVALID_ARGUMENT, 400, '117')
  await denied(await w.check('GET', '', bearer), 'no path', status.INVALID_ARGUMENT, 400, '117')
  const bare = await unary<CheckResponse>(w.grpc.extAuthz, 'Check', {})
  await denied(bare, 'no attributes at all', status.INVALID_ARGUMENT, 400, '117')

  w.setStale(true)
  await denied(await w.check('GET', '/products/1', bearer), 'stale policy', status.UNAVAILABLE, 503, '903')
  w.setStale(false)
  const back = await w.check('GET', '/products/1', bearer)
  t.equal(back.response?.status.code ?? 0, status.OK, 'current again: allowed')
})

t.test("verify's refusal table: every ambiguous path is refused, never allowed", async (t) => {
  const w = await world(t)
  for (const { path, reason } of AMBIGUOUS_PATHS) {
    const res = await w.check('GET', path, { authorization: `Bearer ${w.token}` })
    t.equal(res.response?.status.code, status.PERMISSION_DENIED, `${JSON.stringify(path)} (${reason}): PERMISSION_DENIED`)
    t.equal((JSON.parse(res.response?.denied_response?.body ?? '{}') as { response_code?: string }).response_code, '303', `${JSON.stringify(path)}: 303`)
  }
})
