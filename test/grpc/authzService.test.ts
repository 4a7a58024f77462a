/**
 * aps.authz.v1 Check and CheckBatch (section 4's rules over gRPC), the
 * health service, and bad input: an oversize message, malformed protobuf,
 * thousands of headers, a request stream that never ends.
 */
import { connect, constants } from 'node:http2'
import t from 'tap'
import { Metadata, status } from '@grpc/grpc-js'
import { buildTestApp, onboard, register } from '../helper.js'
import { envoyCheckRequest, startTestGrpc, unary } from '../support/grpcClient.js'
import { RESPONSE_CODE_TRAILER } from '../../src/grpc/status.js'

const bearer = (token: string, extra: Record<string, string> = {}): Metadata => {
  const m = new Metadata()
  m.set('authorization', `Bearer ${token}`)
  for (const [k, v] of Object.entries(extra)) m.set(k, v)
  return m
}

t.test('Check and CheckBatch: the answers and refusals of check and check-batch', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const other = await onboard(ta, 'm2')
  const grant = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } } })
  t.equal(grant.statusCode, 200)
  let stale = false
  const grpc = await startTestGrpc(t, ta.service, { replica: { isStale: () => stale, revisionText: '7' } })
  const token = ta.tokenFor(clerk)

  const allowed = await unary<{ allowed?: boolean; decision_id: string }>(grpc.authz, 'Check', { obj: 'orders', act: 'read' }, bearer(token))
  t.equal(allowed.error, null)
  t.equal(allowed.response?.allowed, true)
  t.equal(allowed.headers?.get('x-decision-id')[0], allowed.response?.decision_id, 'the decision id in metadata and answer')
  t.equal(allowed.headers?.get('x-policy-revision')[0], '7')
  const no = await unary<{ allowed?: boolean }>(grpc.authz, 'Check', { obj: 'orders', act: 'refund' }, bearer(token))
  t.equal(no.response?.allowed ?? false, false, 'not held: false, not an error')
  const unknown = await unary<{ allowed?: boolean }>(grpc.authz, 'Check', { obj: 'nothing', act: 'here' }, bearer(token))
  t.equal(unknown.error, null, 'a pair outside the catalog is false, not an error')
  t.equal(unknown.response?.allowed ?? false, false)
  const otherDomain = await unary<{ allowed?: boolean }>(grpc.authz, 'Check', { obj: 'orders', act: 'read', domain: 'm2' }, bearer(token))
  t.equal(otherDomain.response?.allowed ?? false, false, 'another domain answers false, never forced')

  const refused = async (res: Awaited<ReturnType<typeof unary>>, what: string, code: status, responseCode: string) => {
    t.equal(res.error?.code, code, `${what}: status ${code}`)
    t.equal(res.error?.metadata.get(RESPONSE_CODE_TRAILER)[0], responseCode, `${what}: response code ${responseCode}`)
  }
  await refused(await unary(grpc.authz, 'Check', { obj: 'orders', act: 'read' }), 'no token', status.UNAUTHENTICATED, '200')
  await refused(await unary(grpc.authz, 'Check', { obj: 'orders', act: 'read', user_id: owner.id }, bearer(token)), 'user_id without permission:read', status.PERMISSION_DENIED, '300')
  await refused(await unary(grpc.authz, 'Check', { obj: 'orders', act: 'read', user_id: other.id }, bearer(ta.tokenFor(owner))), "another merchant's user", status.NOT_FOUND, '401')
  await refused(await unary(grpc.authz, 'Check', { obj: 'or ders', act: 'read' }, bearer(token)), 'a malformed obj', status.INVALID_ARGUMENT, '100')
  await refused(await unary(grpc.authz, 'Check', { act: 'read' }, bearer(token)), 'no obj', status.INVALID_ARGUMENT, '100')
  const about = await unary<{ allowed?: boolean }>(grpc.authz, 'Check', { obj: 'orders', act: 'read', user_id: clerk.id }, bearer(ta.tokenFor(owner)))
  t.equal(about.response?.allowed, true, "the owner asks about its clerk's pair")
  const es = await unary(grpc.authz, 'Check', { obj: 'orders', act: 'read' }, bearer('x.y.z', { 'accept-language': 'es' }))
  t.match(es.error?.details, /token/i)
  t.not(es.error?.details, (await unary(grpc.authz, 'Check', { obj: 'orders', act: 'read' }, bearer('x.y.z'))).error?.details, 'localised by accept-language')

  const batch = await unary<{ results: unknown[]; decision_id: string }>(
    grpc.authz,
    'CheckBatch',
    { checks: [{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'refund' }, { obj: 'orders', act: 'read', domain: 'm2' }] },
    bearer(token),
  )
  t.equal(batch.error, null)
  t.same(
    batch.response?.results.map((r) => ({ allowed: false, ...(r as object) })),
    [
      { obj: 'orders', act: 'read', domain: 'm1', allowed: true },
      { obj: 'orders', act: 'refund', domain: 'm1', allowed: false },
      { obj: 'orders', act: 'read', domain: 'm2', allowed: false },
    ],
    'in request order, each domain resolved',
  )
  await refused(await unary(grpc.authz, 'CheckBatch', { checks: [] }, bearer(token)), 'no checks', status.INVALID_ARGUMENT, '100')
  const many = Array.from({ length: 101 }, () => ({ obj: 'orders', act: 'read' }))
  await refused(await unary(grpc.authz, 'CheckBatch', { checks: many }, bearer(token)), '101 checks', status.INVALID_ARGUMENT, '100')
  stale = true
  await refused(await unary(grpc.authz, 'Check', { obj: 'orders', act: 'read' }, bearer(token)), 'stale', status.UNAVAILABLE, '903')
})

t.test('health: SERVING only when /readyz would be ready', async (t) => {
  const ta = await buildTestApp(t)
  let state: 'ready' | 'stale' | 'unavailable' = 'ready'
  const grpc = await startTestGrpc(t, ta.service, { readiness: async () => state })
  const ask = async (service = '') => (await unary<{ status?: number }>(grpc.health, 'Check', { service })).response?.status
  t.equal(await ask(), 1, 'SERVING')
  t.equal(await ask('envoy.service.auth.v3.Authorization'), 1, 'ext_authz SERVING')
  state = 'stale'
  t.equal(await ask(), 2, 'stale: NOT_SERVING')
  state = 'unavailable'
  t.equal(await ask('aps.authz.v1.Authz'), 2, 'no database: NOT_SERVING')
  t.equal((await unary(grpc.health, 'Check', { service: 'nope' })).error?.code, status.NOT_FOUND, 'an unknown service')
})

t.test('bad input: refused with the right status, bounded, no crash', async (t) => {
  const ta = await buildTestApp(t)
  const grpc = await startTestGrpc(t, ta.service, { maxReceiveBytes: 64 * 1024, requestTimeoutMs: 300 })
  const token = ta.rootToken

  const big = await unary(grpc.extAuthz, 'Check', envoyCheckRequest('GET', '/x', { authorization: `Bearer ${token}`, 'x-pad': 'a'.repeat(100 * 1024) }))
  t.equal(big.error?.code, status.RESOURCE_EXHAUSTED, 'a message over the bound: RESOURCE_EXHAUSTED')

  const headers = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`x-h-${i}`, 'v']))
  const crowded = await unary<{ status: { code?: number } }>(grpc.extAuthz, 'Check', envoyCheckRequest('GET', '/x', { ...headers, authorization: `Bearer ${token}` }))
  t.equal(crowded.error, null, 'thousands of headers within the bound: answered')
  t.equal(crowded.response?.status.code, status.PERMISSION_DENIED, 'no route map: denied')

  // Raw HTTP/2: a frame that is no protobuf, and a stream that never ends.
  const session = connect(`http://${grpc.address}`)
  t.teardown(() => session.close())
  const raw = (body: Buffer | null) =>
    new Promise<{ grpcStatus: string | undefined }>((resolve) => {
      const stream = session.request({
        [constants.HTTP2_HEADER_METHOD]: 'POST',
        [constants.HTTP2_HEADER_PATH]: '/envoy.service.auth.v3.Authorization/Check',
        'content-type': 'application/grpc',
        te: 'trailers',
      })
      // Resolved by the status (in a trailers-only answer or in the trailers); the client's side stays open, as the client chose.
      const done = (grpcStatus: string | undefined): void => {
        resolve({ grpcStatus })
        stream.close()
      }
      stream.on('response', (h) => h['grpc-status'] !== undefined && done(h['grpc-status'] as string))
      stream.on('trailers', (h) => done(h['grpc-status'] as string))
      stream.on('close', () => done(undefined))
      // Bounds the test, not the server: no status by then is a failure.
      setTimeout(() => done(undefined), 5000).unref()
      stream.resume()
      if (body === null) stream.write(Buffer.from([0, 0, 0, 0, 50, 10]))
      else stream.end(body)
    })
  const junk = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a])
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, junk.length]), junk])
  const malformed = await raw(frame)
  t.equal(malformed.grpcStatus, String(status.INTERNAL), 'malformed protobuf: INTERNAL, nothing decided')
  const endless = await raw(null)
  t.equal(endless.grpcStatus, String(status.DEADLINE_EXCEEDED), 'a request that never ends: DEADLINE_EXCEEDED after REQUEST_TIMEOUT_MS')

  // Several at once, begun apart, with answered calls in between (one timer serves them all, src/grpc/server.ts): each ends at its own deadline, none before it.
  const staggered = await Promise.all(
    [0, 100, 200].map(async (delay) => {
      await new Promise((resolve) => setTimeout(resolve, delay))
      const began = performance.now()
      const [ended, answered] = await Promise.all([
        raw(null).then((r) => ({ ...r, after: performance.now() - began })),
        unary(grpc.extAuthz, 'Check', envoyCheckRequest('GET', '/x', { authorization: `Bearer ${token}` })),
      ])
      return { ...ended, answered: answered.error === null }
    }),
  )
  for (const [i, ended] of staggered.entries()) {
    t.equal(ended.grpcStatus, String(status.DEADLINE_EXCEEDED), `endless stream ${i + 1} of 3: DEADLINE_EXCEEDED`)
    t.ok(ended.after >= 300, `endless stream ${i + 1} of 3: not before its own REQUEST_TIMEOUT_MS (${Math.round(ended.after)} ms)`)
    t.ok(ended.answered, `the call sent beside endless stream ${i + 1}: answered`)
  }

  const after = await unary<{ status: { code?: number } }>(grpc.extAuthz, 'Check', envoyCheckRequest('GET', '/x', { authorization: `Bearer ${token}` }))
  t.equal(after.error, null, 'the server still answers')
})
