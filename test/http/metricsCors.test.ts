/**
 * What operators and browser admin UIs need around the API: `/metrics` in Prometheus' text format, guarded by METRICS_TOKEN when
 * set; CORS off by default, and for the listed origins only when on.
 */
import t from 'tap'
import { buildTestApp, onboard, register } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('metrics and CORS headers')

/** One sample's value from Prometheus' text format, by its name and exact label set. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

t.test('GET /metrics', async (t) => {
  const ta = await buildTestApp(t)
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  for (let i = 0; i < 3; i++) await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read' })
  await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: 'clerk@m1.example', password: 'wrong-password' } } })

  const res = await ta.call({ method: 'GET', url: '/metrics', token: null })
  t.equal(res.statusCode, 200, 'open when METRICS_TOKEN is not set')
  t.match(res.headers['content-type'], /^text\/plain/)
  const text = res.body
  t.equal(sample(text, 'aps_decisions_total{endpoint="check",outcome="deny"}'), 3, 'decisions by outcome')
  t.equal(sample(text, 'aps_decisions_total{endpoint="check",outcome="allow"}'), 1)
  t.equal(sample(text, 'aps_http_request_duration_seconds_count{method="GET",route="/v2/authz/check",status_code="200"}'), 4, 'latency per route and status')
  t.equal(sample(text, 'aps_logins_total{outcome="failure"}'), 1, 'login failures')
  t.equal(sample(text, 'aps_policy_revision'), ta.service.replica.revision, 'the applied revision')
  t.ok((sample(text, 'aps_policy_revision_unconfirmed_seconds') ?? -1) >= 0, 'and how long since it was confirmed')
  t.equal(sample(text, 'aps_policy_reloads_total'), 0)
  t.match(text, /^# TYPE aps_policy_reloads_total counter$/m, 'reloads are a counter')
  t.notMatch(text, /^# TYPE \S+_total gauge$/m, 'no gauge is named like a counter')
  t.match(text, /aps_process_cpu_seconds_total/, 'process metrics')
  if (ta.service.db.kind === 'postgres') t.ok((sample(text, 'aps_db_pool_connections{state="total"}') ?? -1) >= 1, 'pool use')
})

t.test('aps_decisions_total counts gateway decisions only, never explanations or the admin routes that ask the engine', async (t) => {
  const ta = await buildTestApp(t)
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const grant = (dryRun: boolean) => ({ command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1', ...(dryRun ? { dry_run: true } : {}) } })
  t.equal((await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: grant(false) })).statusCode, 200)
  const series = ['check', 'check_batch', 'verify'].flatMap((endpoint) => ['allow', 'deny'].map((outcome) => `aps_decisions_total{endpoint="${endpoint}",outcome="${outcome}"}`))
  const counts = async (): Promise<Record<string, number | undefined>> => {
    const text = (await ta.call({ method: 'GET', url: '/metrics', token: null })).body
    return Object.fromEntries(series.map((name) => [name, sample(text, name)]))
  }
  const batch = (explain: boolean) => ({
    command: 'check-batch',
    data: { user_id: clerk.id, ...(explain ? { explain: true } : {}), checks: [{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'refund' }] },
  })

  const before = await counts()
  const questions = [
    { method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}&explain=true` },
    { method: 'GET', url: `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}&explain=true` },
    { method: 'GET', url: '/v2/authz/check?obj=orders&act=read&explain=true' },
    { method: 'POST', url: '/v2/authz/check-batch', body: batch(true) },
    { method: 'GET', url: `/v2/admin/permissions/users/${clerk.id}` },
    { method: 'GET', url: '/v2/admin/permissions/holders?obj=orders&act=read&domain=m1' },
    { method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: grant(true) },
    { method: 'GET', url: '/v2/profile/permissions' },
  ] as const
  for (const question of questions) t.equal((await ta.call(question)).statusCode, 200, `${question.method} ${question.url}`)
  t.same(await counts(), before, 'explanations, effective sets, holders and previews leave the counters as they were')

  const clerkToken = ta.tokenFor(clerk)
  await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}` })
  await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read&domain=m1', token: clerkToken })
  await ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: batch(false) })
  await ta.call({ method: 'GET', url: '/v2/authz/verify?obj=orders&act=read', token: clerkToken })
  await ta.call({ method: 'GET', url: '/v2/authz/verify?obj=orders&act=refund', token: clerkToken })
  const after = await counts()
  const moved = Object.fromEntries(series.map((name) => [name, (after[name] ?? 0) - (before[name] ?? 0)]))
  const expected = [2, 1, 1, 1, 1, 1] // check allow and deny, check-batch's, verify's
  t.same(moved, Object.fromEntries(series.map((name, i) => [name, expected[i]])), 'checks, check-batch items and verify move them')
})

t.test('METRICS_TOKEN guards /metrics', async (t) => {
  const token = 'a-scrape-token-long-enough'
  const ta = await buildTestApp(t, { env: { METRICS_TOKEN: token } })
  t.equal((await ta.call({ method: 'GET', url: '/metrics', token: null })).statusCode, 401)
  t.equal((await ta.call({ method: 'GET', url: '/metrics', token: 'a-scrape-token-long-enougX' })).statusCode, 401)
  t.equal((await ta.call({ method: 'GET', url: '/metrics', token: ta.rootToken })).statusCode, 401, "an admin's token is not the scrape token")
  const ok = await ta.call({ method: 'GET', url: '/metrics', token })
  t.equal(ok.statusCode, 200)
  t.match(ok.body, /aps_policy_revision/)
  for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
    const res = await ta.call({ method: 'GET', url: '/metrics', token: null, headers: { authorization: `${scheme} ${token}` } })
    t.equal(res.statusCode, 200, `the scheme's name in any case: ${scheme}`)
  }
  for (const header of [`Basic ${token}`, `Bearer${token}`, 'Bearer ', 'bearer', token]) {
    const res = await ta.call({ method: 'GET', url: '/metrics', token: null, headers: { authorization: header } })
    t.equal(res.statusCode, 401, `refused: ${JSON.stringify(header)}`)
  }
})

t.test('CORS: off by default, the listed origins only when on', async (t) => {
  const preflight = (origin: string) => ({
    method: 'OPTIONS' as const,
    url: '/v2/admin/accounts',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
  })
  const off = await buildTestApp(t)
  const none = await off.app.inject(preflight('https://admin.example.com'))
  t.equal(none.headers['access-control-allow-origin'], undefined, 'off by default')

  const on = await buildTestApp(t, { env: { CORS_ORIGINS: 'https://admin.example.com, http://localhost:5173' } })
  const listed = await on.app.inject(preflight('https://admin.example.com'))
  t.equal(listed.statusCode, 204, 'a listed origin gets its preflight')
  t.equal(listed.headers['access-control-allow-origin'], 'https://admin.example.com')
  t.match(String(listed.headers['access-control-allow-methods']), /POST/)
  t.match(String(listed.headers['access-control-allow-headers']), /authorization/)
  const other = await on.app.inject(preflight('https://evil.example'))
  t.equal(other.headers['access-control-allow-origin'], undefined, 'another origin is refused (no allow header)')
  const get = await on.app.inject({ method: 'GET', url: '/v2/profile', headers: { origin: 'http://localhost:5173', authorization: `Bearer ${on.rootToken}` } })
  t.equal(get.statusCode, 200)
  t.equal(get.headers['access-control-allow-origin'], 'http://localhost:5173')
  t.match(String(get.headers['access-control-expose-headers']), /x-policy-revision/, 'the revision header is readable by the UI')
})
