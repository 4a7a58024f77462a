/**
 * Decision events as the gateway's routes hand them over (CONTRACT 15):
 * their fields for each source, ids per batch item, the reason and the row
 * that decided, what DECISION_LOG keeps, the original path without its
 * query, truncated client addresses.
 */
import t from 'tap'
import { modelId } from '../../src/compose.js'
import { readFileSync } from 'node:fs'
import { appLoggingDecisions as appLogging } from '../support/decisionCapture.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'
import { eventually } from '../support/eventually.js'
import { writeImpliesReadModel } from '../support/shadowModels.js'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import { buildTestApp, buildTestService, tempDir } from '../helper.js'

const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/

t.test('DECISION_LOG=all: every source, with the reason and the row that decided', async (t) => {
  const { ta, events } = await appLogging(t, { DECISION_LOG: 'all', DECISION_LOG_CLIENT_IP_PREFIX: '24,48', TRUST_PROXY: 'true' })
  const { clerk, authorization, base } = await listeningWithClerk(t, ta)
  const before = events().length
  const get = (url: string, headers: Record<string, string> = {}) => fetch(`${base}${url}`, { headers: { authorization, ...headers } }).then(async (r) => ({ status: r.status, id: r.headers.get('x-decision-id'), body: await r.text() }))

  const allowed = await get('/v2/authz/check?obj=orders&act=read', { 'x-forwarded-for': '203.0.113.77' })
  const denied = await get('/v2/authz/check?obj=orders&act=refund', { 'x-forwarded-for': '2001:db8:1:2::5' })
  const batch = await fetch(`${base}/v2/authz/check-batch`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'read', domain: 'm2' }] } }),
  })
  const batchId = batch.headers.get('x-decision-id')
  await batch.text()
  const mapped = await get('/v2/authz/verify', { 'x-original-method': 'GET', 'x-original-uri': '/api/orders/9?secret=1' })
  const nothing = await get('/v2/authz/verify')
  const prefix = await get('/v2/authz/verify/api/orders/17?x=1')
  const about = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  t.equal(about.statusCode, 200)
  const explained = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read&explain=true' })
  t.equal(explained.statusCode, 200)

  t.ok(await eventually(() => events().length - before >= 8), 'eight decisions logged')
  const logged = events().slice(before)
  const byId = new Map(logged.map((e) => [e.decision_id, e]))
  t.equal(logged.length, 8, 'the explanation is not logged')

  const first = byId.get(allowed.id ?? '')
  t.match(first, {
    source: 'check',
    subject: { user_id: clerk.id, principal_type: 'merchant', merchant_id: 'm1', sub_role_code: 'clerk' },
    domain: 'm1',
    obj: 'orders',
    act: 'read',
    allowed: true,
    reason: { kind: 'role', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] },
    policy_revision: Number,
    model_id: modelId(readFileSync(ta.service.config.modelPath, 'utf8')),
    replica: String,
    request_id: String,
    client_ip: '203.0.113.0',
  })
  t.match(first?.time, TIME, 'RFC 3339 with microseconds')
  t.notOk(first !== undefined && 'caller_id' in first, 'no caller when one asks about oneself')
  t.notOk(first !== undefined && ('method' in first || 'path' in first), 'a check has no original request')
  t.match(byId.get(denied.id ?? ''), { allowed: false, reason: { kind: 'none' }, client_ip: '2001:db8:1::' })
  t.match(byId.get(`${batchId}.0`), { source: 'check_batch', allowed: true, domain: 'm1' })
  t.match(byId.get(`${batchId}.1`), { source: 'check_batch', allowed: false, domain: 'm2', reason: { kind: 'outside_home_domain' } })
  t.match(byId.get(mapped.id ?? ''), { source: 'verify', allowed: true, method: 'GET', path: '/api/orders/9' })
  t.match(byId.get(nothing.id ?? ''), { source: 'verify', allowed: false, reason: { kind: 'no_route' } })
  t.equal(nothing.status, 403)
  t.match(byId.get(prefix.id ?? ''), { source: 'ext_authz', allowed: true, method: 'GET', path: '/api/orders/17' })
  t.match(byId.get(String(about.headers['x-decision-id'])), { source: 'check', caller_id: ta.root.id, subject: { user_id: clerk.id } })
})

t.test('DECISION_LOG=denies (the default) keeps denies only; DECISION_LOG_QUERY keeps the query', async (t) => {
  const { ta, events } = await appLogging(t, { DECISION_LOG_QUERY: 'true' })
  const { authorization, base } = await listeningWithClerk(t, ta)
  const before = events().length
  for (const url of ['/v2/authz/check?obj=orders&act=read', '/v2/authz/check?obj=orders&act=refund', '/v2/authz/verify/api/customers?page=2']) {
    await (await fetch(`${base}${url}`, { headers: { authorization } })).text()
  }
  t.ok(await eventually(() => events().length - before >= 2))
  await new Promise((resolve) => setTimeout(resolve, 50))
  const logged = events().slice(before)
  t.same(
    logged.map((e) => [e.source, e.obj, e.act, e.allowed]),
    [
      ['check', 'orders', 'refund', false],
      ['ext_authz', 'customers', 'read', false],
    ],
  )
  t.equal(logged[1]?.path, '/api/customers?page=2', 'the query kept')
})

t.test('DECISION_LOG=off: nothing, and the answers are the same', async (t) => {
  const { ta, events } = await appLogging(t, { DECISION_LOG: 'off' })
  const { authorization, base } = await listeningWithClerk(t, ta)
  const res = await fetch(`${base}/v2/authz/check?obj=orders&act=refund`, { headers: { authorization } })
  t.equal(await res.text(), '{"response_code":"001","response_text":"Success","data":{"allowed":false}}')
  t.ok(res.headers.get('x-decision-id'), 'still a decision id')
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(events().length, 0)
})

t.test('DECISION_LOG_SINKS=postgres: a refused check reaches GET /v2/admin/decisions, with its id and reason', async (t) => {
  const service = await buildTestService(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP, DECISION_LOG_SINKS: 'postgres', DECISION_LOG_BATCH_MS: '0' } })
  const ta = await buildTestApp(t, { service })
  const { clerk, authorization, base } = await listeningWithClerk(t, ta)
  const denied = await fetch(`${base}/v2/authz/check?obj=orders&act=refund`, { headers: { authorization } })
  const id = denied.headers.get('x-decision-id')
  t.same((await denied.json()) as unknown, { response_code: '001', response_text: 'Success', data: { allowed: false } })
  type Listed = { items: Array<{ decision_id: string; allowed: boolean; obj: string; act: string; reason: { kind: string } }> }
  const listed = async () =>
    ((await ta.call({ method: 'GET', url: `/v2/admin/decisions?user_id=${clerk.id}` })).json() as { data: Listed }).data.items
  t.ok(await eventually(async () => (await listed()).some((item) => item.decision_id === id)), 'the stored decision is listed')
  const item = (await listed()).find((entry) => entry.decision_id === id)
  t.match(item, { allowed: false, obj: 'orders', act: 'refund', reason: { kind: 'none' } })
})

t.test('SHADOW_MODEL_PATH: a gateway check the shadow answers otherwise is logged with `shadow` and listed in the summary by its decision id', async (t) => {
  const shadowPath = join(tempDir(t, 'aps-shadow-'), 'shadow.conf')
  writeFileSync(shadowPath, writeImpliesReadModel)
  const { ta, events } = await appLogging(t, { DECISION_LOG: 'denies', SHADOW_MODEL_PATH: shadowPath })
  const { authorization, base } = await listeningWithClerk(t, ta)
  const grant = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'products', act: 'write', domain: 'm1' } } })
  t.equal(grant.statusCode, 200)
  const asked = await fetch(`${base}/v2/authz/check?obj=products&act=read`, { headers: { authorization } })
  const id = asked.headers.get('x-decision-id')
  t.same(((await asked.json()) as { data: unknown }).data, { allowed: false }, 'the live model answers; the shadow never decides')
  t.ok(await eventually(() => events().some((event) => event.decision_id === id)), 'the decision is logged')
  t.match(
    events().find((event) => event.decision_id === id),
    { allowed: false, reason: { kind: 'none' }, shadow: { allowed: true, reason: { kind: 'role' } } },
    'with what the shadow answered',
  )
  const summary = (await ta.call({ method: 'GET', url: '/v2/admin/model/shadow' })).json() as { data: { disagreements: Array<{ obj: string; act: string; decision_ids: string[] }> } }
  t.same(summary.data.disagreements.map((d) => [d.obj, d.act, d.decision_ids]), [['products', 'read', [id]]], 'the summary names it by its id')
})
