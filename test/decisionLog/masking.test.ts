/**
 * No token, password or header value other than the ones section 15 names
 * ever reaches a sink: every sink's output (stdout, a file, an HTTP
 * receiver) is searched for the secrets the requests carried.
 */
import { readFileSync } from 'node:fs'
import { Writable } from 'node:stream'
import t from 'tap'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import { buildTestApp, buildTestService, tempDir } from '../helper.js'
import { decisionReceiver } from '../support/decisionReceiver.js'
import { eventually } from '../support/eventually.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'

t.test('no sink ever sees a token, a password or another header value', async (t) => {
  let stdout = ''
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      stdout += chunk.toString()
      done()
    },
  })
  const receiver = await decisionReceiver(t)
  const file = `${tempDir(t)}/decisions.ndjson`
  const service = await buildTestService(t, {
    env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP, DECISION_LOG: 'all', DECISION_LOG_SINKS: `stdout,file:${file},http:${receiver.url}`, DECISION_LOG_BATCH_MS: '10' },
    decisionLog: { stdout: stream },
  })
  const ta = await buildTestApp(t, { service })
  const { base } = await listeningWithClerk(t, ta)

  // The clerk logs in with its password: its own token, not one the test made.
  const password = 'admin-pass-123'
  const login = await fetch(`${base}/v2/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'login', data: { email: 'clerk@m1.example', password } }),
  })
  const token = ((await login.json()) as { data: { access_token: string } }).data.access_token
  const custom = 'custom-header-value-5f1e'
  const secrets = { token, password, custom, cookie: 'session-cookie-77aa', basic: 'QWxhZGRpbjpvcGVuIHNlc2FtZQ' }
  const headers = { authorization: `Bearer ${token}`, 'x-custom-secret': custom, cookie: `sid=${secrets.cookie}`, 'proxy-authorization': `Basic ${secrets.basic}` }
  const ids: string[] = []
  const ask = async (url: string, extra: Record<string, string> = {}, init: RequestInit = {}) => {
    const res = await fetch(`${base}${url}`, { headers: { ...headers, ...extra }, ...init })
    await res.arrayBuffer()
    ids.push(res.headers.get('x-decision-id') ?? '')
  }
  await ask('/v2/authz/check?obj=orders&act=read')
  await ask('/v2/authz/check?obj=orders&act=refund&lang=es')
  await ask('/v2/authz/verify', { 'x-original-method': 'GET', 'x-original-uri': `/api/orders/9?access_token=${token}&password=${password}` })
  await ask('/v2/authz/verify', { 'x-forwarded-method': 'GET', 'x-forwarded-uri': `/api/refunds/1?token=${token}` })
  await ask(`/v2/authz/verify/api/orders/17?access_token=${token}`)
  await ask('/v2/authz/check-batch', { 'content-type': 'application/json' }, {
    method: 'POST',
    body: JSON.stringify({ command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'refund' }] } }),
  })

  const everywhere = () => [stdout, readFileSync(file, 'utf8'), receiver.bodies.join('\n')]
  t.ok(await eventually(() => everywhere().every((text) => ids.every((id) => text.includes(id)))), 'every sink has every decision')
  for (const [sink, text] of ['stdout', 'file', 'http'].map((sink, i) => [sink, everywhere()[i] ?? ''] as const)) {
    t.ok(text.length > 0, `${sink}: something was written`)
    for (const [what, secret] of Object.entries(secrets)) t.notOk(text.includes(secret), `${sink}: no ${what}`)
  }
})
