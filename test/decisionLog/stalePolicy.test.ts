/**
 * A gateway decision refused because the policy could not be confirmed
 * current (503 `903`, gRPC UNAVAILABLE) is a decision (CONTRACT 15): its
 * answer carries a decision id, and it is logged as a `stale_policy` deny
 * about the caller, with the pair the request named where it named one,
 * from HTTP's check, check-batch, verify and verify's path form, and from
 * gRPC's Check, CheckBatch and ext_authz.
 */
import t from 'tap'
import { Metadata } from '@grpc/grpc-js'
import { appLoggingDecisions } from '../support/decisionCapture.js'
import { eventually } from '../support/eventually.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'
import { envoyCheckRequest, startTestGrpc, unary } from '../support/grpcClient.js'

interface EnvoyAnswer {
  status: { code?: number }
  denied_response?: { status: { code: number }; headers?: Array<{ header: { key: string; value: string } }> }
}

t.test('refusals on a stale policy: a decision id on each answer, a stale_policy event about the caller', async (t) => {
  // Nothing confirms the revision once written (the poll is 10 minutes away), so it goes stale after a second.
  const { ta, events } = await appLoggingDecisions(t, { MAX_STALENESS_MS: '1000', REVISION_POLL_MS: '600000' })
  const { clerk, authorization, base } = await listeningWithClerk(t, ta)
  const grpc = await startTestGrpc(t, ta.service)
  await ta.service.replica.sync()
  t.ok(await eventually(() => ta.service.replica.isStale()), 'the policy goes stale')
  const before = events().length

  const get = async (url: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${url}`, { headers: { authorization, ...headers } })
    await res.text()
    return { status: res.status, id: res.headers.get('x-decision-id') ?? '' }
  }
  const check = await get('/v2/authz/check?obj=orders&act=read&domain=m1')
  const about = await get(`/v2/authz/check?obj=orders&act=read&user_id=${ta.root.id}`)
  const malformed = await get('/v2/authz/check?obj=or%20ders&act=read')
  const verify = await get('/v2/authz/verify', { 'x-original-method': 'POST', 'x-original-uri': '/api/orders/3/refund?token=x' })
  const prefix = await get('/v2/authz/verify/api/customers/4')
  const batchRes = await fetch(`${base}/v2/authz/check-batch`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }] } }),
  })
  await batchRes.text()
  const batch = { status: batchRes.status, id: batchRes.headers.get('x-decision-id') ?? '' }
  const unauthenticated = await fetch(`${base}/v2/authz/check?obj=orders&act=read`)
  await unauthenticated.text()
  t.same([check, about, malformed, verify, prefix, batch].map((r) => r.status), [503, 503, 503, 503, 503, 503], 'every one refused 503')
  t.ok([check, about, malformed, verify, prefix, batch].every((r) => r.id !== ''), 'each answer carries its decision id')
  t.equal(unauthenticated.status, 401, 'no token: refused before the policy is asked, no decision')

  const metadata = new Metadata()
  metadata.set('authorization', authorization)
  const grpcCheck = await unary(grpc.authz, 'Check', { obj: 'orders', act: 'refund' }, metadata)
  const grpcBatch = await unary(grpc.authz, 'CheckBatch', { checks: [{ obj: 'orders', act: 'read' }] }, metadata)
  const ext = await unary<EnvoyAnswer>(grpc.extAuthz, 'Check', envoyCheckRequest('GET', '/api/orders/5', { authorization }))
  const extNoToken = await unary<EnvoyAnswer>(grpc.extAuthz, 'Check', envoyCheckRequest('GET', '/api/orders/5'))
  t.equal(grpcCheck.error?.code, 14, 'gRPC Check: UNAVAILABLE')
  t.equal(grpcBatch.error?.code, 14, 'gRPC CheckBatch: UNAVAILABLE')
  t.equal(ext.response?.status.code, 14, 'ext_authz: UNAVAILABLE')
  t.equal(extNoToken.response?.status.code, 14, 'ext_authz without a token: UNAVAILABLE all the same')
  const extId = ext.response?.denied_response?.headers?.find((h) => h.header.key === 'x-decision-id')?.header.value ?? ''
  const grpcId = (call: typeof grpcCheck) => String(call.headers?.get('x-decision-id')[0])

  t.ok(await eventually(() => events().length - before >= 9), 'nine stale decisions logged')
  await new Promise((resolve) => setTimeout(resolve, 100))
  const logged = events().slice(before)
  t.equal(logged.length, 9, 'no event for a call without a valid token')
  const byId = new Map(logged.map((e) => [e.decision_id, e]))
  t.ok(logged.every((e) => e.allowed === false && e.reason.kind === 'stale_policy' && e.reason.rule === undefined), 'each a stale_policy deny, no row')
  t.ok(logged.every((e) => e.subject.user_id === clerk.id && e.caller_id === undefined), 'each about the caller')

  t.match(byId.get(check.id), { source: 'check', domain: 'm1', obj: 'orders', act: 'read' })
  t.match(byId.get(about.id), { source: 'check', domain: 'm1', obj: 'orders', act: 'read' }, 'about the caller, not the user it asked about')
  t.match(byId.get(malformed.id), { source: 'check', domain: '', obj: '', act: '' }, 'a malformed pair is not logged')
  t.match(byId.get(verify.id), { source: 'verify', domain: 'm1', obj: 'orders', act: 'refund', method: 'POST', path: '/api/orders/3/refund' })
  t.match(byId.get(prefix.id), { source: 'ext_authz', domain: 'm1', obj: 'customers', act: 'read', method: 'GET', path: '/api/customers/4' })
  t.match(byId.get(batch.id), { source: 'check_batch', obj: '', act: '' }, 'a batch refused whole: one event, its id')
  t.match(byId.get(grpcId(grpcCheck)), { source: 'grpc_check', domain: 'm1', obj: 'orders', act: 'refund' })
  t.match(byId.get(grpcId(grpcBatch)), { source: 'grpc_check', obj: '', act: '' })
  t.match(byId.get(extId), { source: 'ext_authz', domain: 'm1', obj: 'orders', act: 'read', method: 'GET', path: '/api/orders/5' })
})
