/**
 * gRPC decisions in the decision log (CONTRACT 15): aps.authz.v1 Check and
 * CheckBatch (`grpc_check`) and Envoy's ext_authz Check (`ext_authz`) are
 * logged through the service's recorder with the decision id their answer
 * carries, the reason and row of the evaluation that answered, and the same
 * fields as HTTP's events; DECISION_LOG and its sampling apply alike; a
 * stale policy's refusal is a `stale_policy` event.
 */
import t from 'tap'
import { Metadata } from '@grpc/grpc-js'
import type { DecisionEvent } from '../../src/decisionLog/event.js'
import { appLoggingDecisions } from '../support/decisionCapture.js'
import { eventually } from '../support/eventually.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'
import { envoyCheckRequest, startTestGrpc, unary, type GrpcHarness } from '../support/grpcClient.js'

interface HeaderOption {
  header: { key: string; value: string }
}
interface EnvoyAnswer {
  status: { code?: number }
  ok_response?: { headers?: HeaderOption[] }
  denied_response?: { headers?: HeaderOption[] }
}

const metadata = (entries: Record<string, string>): Metadata => {
  const m = new Metadata()
  for (const [k, v] of Object.entries(entries)) m.set(k, v)
  return m
}

/** aps.authz.v1: the call's decision id, from its initial metadata. */
async function grpcCheck(grpc: GrpcHarness, method: 'Check' | 'CheckBatch', request: unknown, entries: Record<string, string>): Promise<string> {
  const res = await unary(grpc.authz, method, request, metadata(entries))
  if (res.error !== null) throw res.error
  return String(res.headers?.get('x-decision-id')[0])
}

/** ext_authz: the decision id the answer hands Envoy (allowed or denied). */
async function envoyCheck(grpc: GrpcHarness, method: string, path: string, headers: Record<string, string>): Promise<{ id: string; allowed: boolean }> {
  const res = await unary<EnvoyAnswer>(grpc.extAuthz, 'Check', envoyCheckRequest(method, path, headers))
  const answer = res.response?.ok_response ?? res.response?.denied_response
  const id = answer?.headers?.find((h) => h.header.key === 'x-decision-id')?.header.value ?? ''
  return { id, allowed: (res.response?.status.code ?? 0) === 0 }
}

const keys = (event: DecisionEvent | undefined): string[] => Object.keys(event ?? {}).sort()

t.test('DECISION_LOG=all: each gRPC decision is an event with its answer\'s id, the reason and row that decided, and HTTP\'s fields', async (t) => {
  const { ta, events, text } = await appLoggingDecisions(t, { DECISION_LOG: 'all', DECISION_LOG_CLIENT_IP_PREFIX: '24,48', TRUST_PROXY: 'true' })
  const { clerk, authorization, base } = await listeningWithClerk(t, ta)
  const grpc = await startTestGrpc(t, ta.service)
  const token = authorization.slice('Bearer '.length)
  const before = events().length

  // HTTP's events, to compare the fields with.
  const httpCheck = (await fetch(`${base}/v2/authz/check?obj=orders&act=read`, { headers: { authorization } })).headers.get('x-decision-id')
  const httpExt = await fetch(`${base}/v2/authz/verify/api/orders/17?x=1`, { headers: { authorization } })
  const httpExtId = httpExt.headers.get('x-decision-id')
  await httpExt.text()

  const allowed = await grpcCheck(grpc, 'Check', { obj: 'orders', act: 'read' }, { authorization, 'x-forwarded-for': '203.0.113.77', 'x-request-id': 'req-grpc-1' })
  const denied = await grpcCheck(grpc, 'Check', { obj: 'orders', act: 'refund' }, { authorization, 'x-forwarded-for': '2001:db8:1:2::5' })
  const about = await grpcCheck(grpc, 'Check', { obj: 'orders', act: 'read', user_id: clerk.id }, { authorization: `Bearer ${ta.rootToken}` })
  const batch = await grpcCheck(grpc, 'CheckBatch', { checks: [{ obj: 'orders', act: 'read', domain: 'm2' }, { obj: 'orders', act: 'read' }] }, { authorization })
  const extAllowed = await envoyCheck(grpc, 'GET', '/api/orders/9?secret=1', { authorization, 'x-forwarded-for': '198.51.100.23', 'x-request-id': 'envoy-req-9' })
  const extDenied = await envoyCheck(grpc, 'POST', '/api/orders/9/refund', { authorization })
  const extNoRoute = await envoyCheck(grpc, 'GET', '/nothing/here', { authorization })
  const extAmbiguous = await envoyCheck(grpc, 'GET', '/api/orders/%2e%2e/customers', { authorization })
  t.same([extAllowed.allowed, extDenied.allowed, extNoRoute.allowed, extAmbiguous.allowed], [true, false, false, false])

  t.ok(await eventually(() => events().length - before >= 11), 'eleven decisions logged')
  const logged = events().slice(before)
  t.equal(logged.length, 11)
  const byId = new Map(logged.map((e) => [e.decision_id, e]))
  t.equal(byId.size, 11, 'every decision its own id, gRPC and HTTP from one sequence')

  const first = byId.get(allowed)
  t.match(first, {
    source: 'grpc_check',
    subject: { user_id: clerk.id, principal_type: 'merchant', merchant_id: 'm1', sub_role_code: 'clerk' },
    domain: 'm1',
    obj: 'orders',
    act: 'read',
    allowed: true,
    reason: { kind: 'role', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] },
    policy_revision: ta.service.replica.revision,
    model_id: byId.get(httpCheck ?? '')?.model_id,
    replica: byId.get(httpCheck ?? '')?.replica,
    request_id: 'req-grpc-1',
    client_ip: '203.0.113.0',
  })
  t.same(keys(first), keys(byId.get(httpCheck ?? '')), "a gRPC check's event has exactly an HTTP check's fields")
  t.match(byId.get(denied), { source: 'grpc_check', allowed: false, reason: { kind: 'none' }, client_ip: '2001:db8:1::', request_id: '' })
  t.notOk(byId.get(denied)?.reason.rule, 'no row decided a deny by default')
  t.match(byId.get(about), { source: 'grpc_check', caller_id: ta.root.id, subject: { user_id: clerk.id }, allowed: true })
  t.match(byId.get(`${batch}.0`), { source: 'grpc_check', domain: 'm2', allowed: false, reason: { kind: 'outside_home_domain' } })
  t.match(byId.get(`${batch}.1`), { source: 'grpc_check', domain: 'm1', allowed: true, reason: { kind: 'role', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] } })
  t.notOk(byId.has(batch), "a batch's items are logged, not the batch")

  const ext = byId.get(extAllowed.id)
  t.match(ext, {
    source: 'ext_authz',
    subject: { user_id: clerk.id },
    domain: 'm1',
    obj: 'orders',
    act: 'read',
    allowed: true,
    reason: { kind: 'role', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] },
    method: 'GET',
    path: '/api/orders/9',
    request_id: 'envoy-req-9',
    client_ip: '198.51.100.0',
  })
  t.same(keys(ext), keys(byId.get(httpExtId ?? '')), "an ext_authz event has exactly the HTTP ext_authz path's fields")
  t.match(byId.get(extDenied.id), { source: 'ext_authz', allowed: false, obj: 'orders', act: 'refund', reason: { kind: 'none' }, method: 'POST', path: '/api/orders/9/refund' })
  t.match(byId.get(extNoRoute.id), { source: 'ext_authz', allowed: false, obj: '', act: '', reason: { kind: 'no_route' }, path: '/nothing/here' })
  t.match(byId.get(extAmbiguous.id), { source: 'ext_authz', allowed: false, reason: { kind: 'no_route' } })
  t.notOk(text().includes(token), 'the token appears nowhere in the log')
})

t.test('denies only by default; DECISION_LOG_ALLOW_SAMPLE=0 keeps no allow; off logs nothing, and the ids are still answered', async (t) => {
  for (const [env, expected] of [
    [{}, ['orders:refund', 'orders:refund']],
    [{ DECISION_LOG: 'all', DECISION_LOG_ALLOW_SAMPLE: '0' }, ['orders:refund', 'orders:refund']],
    [{ DECISION_LOG: 'off' }, []],
  ] as const) {
    await t.test(JSON.stringify(env), async (t) => {
      const { ta, events } = await appLoggingDecisions(t, env)
      const { authorization } = await listeningWithClerk(t, ta)
      const grpc = await startTestGrpc(t, ta.service)
      const ids = [
        await grpcCheck(grpc, 'Check', { obj: 'orders', act: 'read' }, { authorization }),
        await grpcCheck(grpc, 'Check', { obj: 'orders', act: 'refund' }, { authorization }),
        (await envoyCheck(grpc, 'GET', '/api/orders/1', { authorization })).id,
        (await envoyCheck(grpc, 'POST', '/api/orders/1/refund', { authorization })).id,
      ]
      t.ok(ids.every((id) => id !== '' && id !== 'undefined'), 'every answer carries a decision id')
      if (expected.length > 0) t.ok(await eventually(() => events().length >= expected.length))
      await new Promise((resolve) => setTimeout(resolve, 50))
      t.same(
        events().map((e) => `${e.obj}:${e.act}`),
        expected,
      )
      t.same(
        events().map((e) => e.decision_id),
        expected.length === 0 ? [] : [ids[1], ids[3]],
      )
    })
  }
})
