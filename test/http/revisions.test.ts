/**
 * Revisions over HTTP, on one replica and either
 * database: every answer says the revision memory reflects, every write
 * answers the store's revision after it, reads wait boundedly for
 * `min_revision`, and the decision routes fail closed once the revision has
 * gone unconfirmed past the staleness bound.
 */
import type { AddressInfo } from 'node:net'
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import { buildTestApp, onboard, register } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { eventually } from '../support/eventually.js'

function expectEnvelope(t: Test, res: LightMyRequestResponse, status: number, code: string): void {
  t.equal(res.statusCode, status, `status ${status}`)
  t.equal((res.json() as { response_code?: string }).response_code, code, `response_code ${code}`)
  t.same(errorShapeProblems(res), [], 'an envelope')
}

const withMinRevision = (url: string, revision: number | string): string => `${url}${url.includes('?') ? '&' : '?'}min_revision=${revision}`

/** The reads that wait for `min_revision`, one per kind of route. */
const readsOf = (clerkId: string): string[] => [
  `/v2/authz/check?obj=orders&act=refund&user_id=${clerkId}`,
  '/v2/admin/permissions/catalog',
  `/v2/admin/permissions/users/${clerkId}`,
  '/v2/admin/permissions/roles/clerk',
  '/v2/admin/permissions/audit-log',
  '/v2/profile',
  '/v2/profile/permissions',
]

const grant = { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund', domain: 'm1' } }

t.test('x-policy-revision on every answer, data.revision on every write', async (t) => {
  const ta = await buildTestApp(t)
  const start = ta.service.replica.revision
  for (const [method, url, token] of [
    ['GET', '/healthz', null],
    ['GET', '/readyz', null],
    ['GET', '/v2/profile', undefined],
    ['GET', '/v2/nowhere', undefined],
    ['GET', '/v2/profile', 'not-a-token'],
  ] as const) {
    const res = await ta.call({ method, url, token })
    t.equal(res.headers['x-policy-revision'], String(start), `${method} ${url} (${res.statusCode}) carries the revision`)
  }

  const owner = await onboard(ta, 'm1')
  t.type((owner as unknown as { revision: unknown }).revision, 'number', 'onboarding answers its revision')
  t.equal((owner as unknown as { revision: number }).revision, ta.service.replica.revision)
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  t.equal((clerk as unknown as { revision: number }).revision, ta.service.replica.revision, 'registration answers its revision')

  const granted = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: grant })
  const revision = (granted.json() as { data: { revision: number } }).data.revision
  t.equal(granted.headers['x-policy-revision'], String(revision), "the write's answer already reflects the write")
  const repeat = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: grant })
  t.same((repeat.json() as { data: { changed: boolean; revision: number } }).data, { ...(granted.json() as { data: object }).data, changed: false }, 'a repeat answers the same revision, unchanged')
})

t.test('min_revision: reads wait for it, boundedly, then answer 503 902', async (t) => {
  const ta = await buildTestApp(t, { env: { MIN_REVISION_WAIT_MS: '200' } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const now = ta.service.replica.revision

  const reached = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}&min_revision=${now}` })
  t.equal(reached.statusCode, 200, 'a revision already applied answers at once')
  const zero = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog?min_revision=0' })
  t.equal(zero.statusCode, 200)

  const reads = readsOf(clerk.id)
  for (const url of reads) {
    // Nothing reaches now + 5: the answer only comes because the wait is bounded (that each read waits is shown below).
    const res = await ta.call({ method: 'GET', url: withMinRevision(url, now + 5) })
    expectEnvelope(t, res, 503, '902')
    t.equal(res.headers['x-policy-revision'], String(now))
    t.equal(ta.service.replica.waitingReads, 0, `${url}: its wait has ended`)
  }
  const es = await ta.call({ method: 'GET', url: `/v2/profile?min_revision=${now + 1}&lang=es` })
  t.match((es.json() as { response_text: string }).response_text, /revisión/, 'localised')

  const batch = await ta.call({
    method: 'POST',
    url: '/v2/authz/check-batch',
    body: { command: 'check-batch', data: { user_id: clerk.id, min_revision: now + 5, checks: [{ obj: 'orders', act: 'refund' }] } },
  })
  expectEnvelope(t, batch, 503, '902')
  const batchNow = await ta.call({
    method: 'POST',
    url: '/v2/authz/check-batch',
    body: { command: 'check-batch', data: { user_id: clerk.id, min_revision: now, checks: [{ obj: 'orders', act: 'refund' }] } },
  })
  t.equal(batchNow.statusCode, 200, 'check-batch with a reached revision answers')

  for (const bad of ['-1', 'abc', '1.5', '99999999999999999999', '9007199254740992']) {
    const res = await ta.call({ method: 'GET', url: `/v2/profile?min_revision=${bad}` })
    expectEnvelope(t, res, 400, '100')
    t.match(JSON.stringify((res.json() as { errors?: unknown }).errors), /min_revision/, `min_revision=${bad} is named`)
  }
})

t.test('min_revision: a read waiting for the next revision answers once a write applies it', async (t) => {
  // A bound far above any write's time, so a loaded machine cannot turn the wait into a 503.
  const ta = await buildTestApp(t, { env: { MIN_REVISION_WAIT_MS: '60000' } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const now = ta.service.replica.revision
  const waiting = ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}&min_revision=${now + 1}` })
  t.ok(await eventually(() => ta.service.replica.waitingReads === 1), 'the read waits')
  await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: grant })
  const answered = await waiting
  t.equal(answered.statusCode, 200, 'the waiting read answers once the write is applied')
  t.same((answered.json() as { data: unknown }).data, { allowed: true }, 'and sees the write')
})

t.test('min_revision: every value the query accepts is waited for; other spellings of a number are refused', async (t) => {
  const ta = await buildTestApp(t, { env: { MIN_REVISION_WAIT_MS: '100' } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const now = ta.service.replica.revision
  const check = `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}`
  // Past the revision: any digits, leading zeros read as the number, up to 2^53 - 1.
  const ahead = ['0000000000000001000', '1000000000000000', '9007199254740991', `000${now + 1}`, String(10 ** 15 - 1), String(10 ** 15)]
  for (const min of ahead) {
    for (const url of [check, '/v2/profile']) expectEnvelope(t, await ta.call({ method: 'GET', url: withMinRevision(url, min) }), 503, '902')
    const batch = await ta.call({
      method: 'POST',
      url: '/v2/authz/check-batch',
      body: { command: 'check-batch', data: { user_id: clerk.id, min_revision: Number(min), checks: [{ obj: 'orders', act: 'refund' }] } },
    })
    expectEnvelope(t, batch, 503, '902')
  }
  t.equal((await ta.call({ method: 'GET', url: withMinRevision(check, `000${now}`) })).statusCode, 200, 'leading zeros before a reached revision: answered')
  // Validation alone reads these as numbers (1000, 1000, 1000, 1000, 5, 0): refused, not answered without the wait.
  for (const bad of ['1e3', '0x3e8', '%201000', '1000.0', '%2B5', '-0', '']) {
    const res = await ta.call({ method: 'GET', url: withMinRevision(check, bad) })
    expectEnvelope(t, res, 400, '100')
    t.match(JSON.stringify((res.json() as { errors?: unknown }).errors), /min_revision/, `min_revision=${bad} is named`)
  }
  for (const bad of [9007199254740992, '1000', -1, 1.5]) {
    const res = await ta.call({
      method: 'POST',
      url: '/v2/authz/check-batch',
      body: { command: 'check-batch', data: { user_id: clerk.id, min_revision: bad, checks: [{ obj: 'orders', act: 'refund' }] } },
    })
    expectEnvelope(t, res, 400, '100')
  }

  // Over a socket the gateway's fast path sees a check first: one with min_revision is never answered there.
  await ta.app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(ta.app.server.address() as AddressInfo).port}`
  const authorization = `Bearer ${ta.rootToken}`
  t.equal((await fetch(`${base}/v2/authz/check?obj=orders&act=refund&domain=m1`, { headers: { authorization } })).status, 200, 'a plain check is answered')
  for (const min of ahead) {
    const res = await fetch(`${base}/v2/authz/check?obj=orders&act=refund&domain=m1&min_revision=${min}`, { headers: { authorization } })
    t.equal(res.status, 503, `min_revision=${min} over a socket: 503`)
    t.equal(((await res.json()) as { response_code: string }).response_code, '902')
  }
})

t.test('min_revision: every read waits for the revision, and answers once a write reaches it', async (t) => {
  // A wait far longer than the test needs: each read is answered by the write, not by the bound.
  const ta = await buildTestApp(t, { env: { MIN_REVISION_WAIT_MS: '60000' } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const reads = readsOf(clerk.id)
  for (const [i, url] of reads.entries()) {
    const next = ta.service.replica.revision + 1
    let answered = false
    const read = ta.call({ method: 'GET', url: withMinRevision(url, next) }).finally(() => (answered = true))
    t.ok(await eventually(() => ta.service.replica.waitingReads === 1 || answered), `${url}: the read reaches its wait`)
    t.notOk(answered, `${url}: and is not answered before revision ${next} exists`)
    const write = i % 2 === 0 ? grant : { ...grant, command: 'revoke-role-permission' }
    const wrote = await ta.call({ method: i % 2 === 0 ? 'POST' : 'DELETE', url: `/v2/admin/permissions/roles/clerk/${i % 2 === 0 ? 'grant' : 'revoke'}`, body: write })
    t.equal((wrote.json() as { data: { revision: number } }).data.revision, next, `the write makes revision ${next}`)
    const res = await read
    t.equal(res.statusCode, 200, `${url}: answered once the write is applied`)
    t.ok(Number(res.headers['x-policy-revision']) >= next, `${url}: from revision ${String(res.headers['x-policy-revision'])}, at least ${next}`)
  }
})

t.test('staleness bound: checks and /readyz fail closed with 903 until the revision is confirmed', async (t) => {
  // Long enough that the check right after a sync is fresh on a busy machine; the test waits for staleness, whatever it takes.
  const ta = await buildTestApp(t, { env: { MAX_STALENESS_MS: '1000', REVISION_POLL_MS: '600000' } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  await ta.service.replica.sync()
  const check = `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}`
  t.equal((await ta.call({ method: 'GET', url: check })).statusCode, 200, 'fresh: answers')
  t.ok(await eventually(() => ta.service.replica.isStale()), 'nothing confirms the revision (the poll is 10 minutes away): it goes stale')
  expectEnvelope(t, await ta.call({ method: 'GET', url: check }), 503, '903')
  expectEnvelope(
    t,
    await ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: { command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }] } } }),
    503,
    '903',
  )
  expectEnvelope(t, await ta.call({ method: 'GET', url: '/readyz', token: null }), 503, '903')
  t.equal((await ta.call({ method: 'GET', url: '/v2/profile' })).statusCode, 200, 'other reads still answer')
  t.equal((await ta.call({ method: 'GET', url: '/healthz', token: null })).statusCode, 200, 'the process is up')

  await ta.service.replica.sync()
  t.equal((await ta.call({ method: 'GET', url: check })).statusCode, 200, 'confirmed again: answers')
  t.equal((await ta.call({ method: 'GET', url: '/readyz', token: null })).statusCode, 200)
})
