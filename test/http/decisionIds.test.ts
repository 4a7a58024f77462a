/**
 * Every gateway decision's answer names it in `X-Decision-Id` (CONTRACT 15):
 * check, check-batch, verify in its three forms and its path form, whether
 * the fast path or the Fastify route answers, allowed or refused; an
 * explanation carries none.
 */
import t from 'tap'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import { buildTestApp } from '../helper.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'

const DECISION_ID = /^[0-9a-f]{16}-[0-9a-z]+$/

t.test('every gateway answer carries a decision id of its own; explanations none', async (t) => {
  const ta = await buildTestApp(t, { env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP } })
  const { authorization, base } = await listeningWithClerk(t, ta)
  const batch = JSON.stringify({ command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'refund' }] } })

  const cases: Array<{ label: string; method?: 'GET' | 'POST'; url: string; headers?: Record<string, string>; body?: string; status: number }> = [
    { label: 'check, allowed', url: '/v2/authz/check?obj=orders&act=read', status: 200 },
    { label: 'check, denied', url: '/v2/authz/check?obj=orders&act=refund', status: 200 },
    { label: 'check in Spanish (the route)', url: '/v2/authz/check?obj=orders&act=read&lang=es', status: 200 },
    { label: 'check-batch', method: 'POST', url: '/v2/authz/check-batch', body: batch, headers: { 'content-type': 'application/json' }, status: 200 },
    { label: 'verify by query, allowed', url: '/v2/authz/verify?obj=orders&act=read', status: 204 },
    { label: 'verify by query, denied', url: '/v2/authz/verify?obj=orders&act=refund', status: 403 },
    { label: 'verify by headers', url: '/v2/authz/verify', headers: { 'x-authz-obj': 'orders', 'x-authz-act': 'read' }, status: 204 },
    { label: 'verify by the route map', url: '/v2/authz/verify', headers: { 'x-original-method': 'GET', 'x-original-uri': '/api/orders/9' }, status: 204 },
    { label: 'verify naming nothing', url: '/v2/authz/verify', status: 403 },
    { label: 'verify, path form', url: '/v2/authz/verify/api/orders/17', status: 200 },
    { label: 'verify, path form, no route', url: '/v2/authz/verify/api/nothing-here', status: 403 },
  ]
  const seen = new Set<string>()
  for (const c of cases) {
    const method = c.method ?? 'GET'
    const headers = { authorization, ...c.headers }
    const injected = await ta.app.inject({ method, url: c.url, headers, ...(c.body !== undefined ? { payload: c.body } : {}) })
    const fetched = await fetch(`${base}${c.url}`, { method, headers, ...(c.body !== undefined ? { body: c.body } : {}) })
    await fetched.arrayBuffer()
    for (const [how, status, id] of [
      ['route', injected.statusCode, injected.headers['x-decision-id']],
      ['HTTP', fetched.status, fetched.headers.get('x-decision-id')],
    ] as const) {
      t.equal(status, c.status, `${c.label} (${how}): status`)
      t.match(id, DECISION_ID, `${c.label} (${how}): a decision id`)
      t.notOk(seen.has(String(id)), `${c.label} (${how}): not given before`)
      seen.add(String(id))
    }
  }

  const explained = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read&explain=true' })
  t.equal(explained.statusCode, 200)
  t.equal(explained.headers['x-decision-id'], undefined, 'an explanation is no gateway decision')
  const unauthenticated = await ta.app.inject({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read' })
  t.equal(unauthenticated.statusCode, 401)
  t.equal(unauthenticated.headers['x-decision-id'], undefined, 'no token, no decision')
})
