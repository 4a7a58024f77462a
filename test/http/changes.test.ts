/**
 * The change stream (CONTRACT 18) in one process: the poll's kinds and
 * fields, pages that never split a revision, tenant confinement both ways,
 * the horizon and 410, a poll of 1,000 changes, and the Server-Sent Events:
 * Last-Event-ID, live delivery, heartbeats, the per-address limit, a reader
 * that stops reading, and the end at shutdown.
 */
import type { AddressInfo } from 'node:net'
import { createSigner } from 'fast-jwt'
import t from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { WHOLE_REVISION, readChangeItems } from '../../src/storage/changeItems.js'
import { TEST_SECRET, backend, buildTestApp, onboard, register, type TestApp } from '../helper.js'
import { openSse } from '../support/sseClient.js'

interface Item {
  revision: number
  index: number
  time: string
  kind: string
  domain: string
  sub_role?: string
  user_id?: string
  obj?: string
  act?: string
  effect?: string
  expires_at?: string
  event?: string
  actor_id: string
}
interface Page {
  items: Item[]
  next_after: number
  horizon: number
}

const poll = async (ta: TestApp, query: string, token = ta.rootToken) => {
  const res = await ta.call({ method: 'GET', url: `/v2/admin/changes?${query}`, token })
  return { status: res.statusCode, body: res.json() as { response_code: string; data: Page; resume_after?: number } }
}

const roleGrant = (ta: TestApp, role: string, obj: string, act: string, domain: string, token = ta.rootToken) =>
  ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, token, body: { command: 'grant-role-permission', data: { obj, act, domain } } })

const revisionOf = (res: { json(): unknown }) => (res.json() as { data: { revision: number } }).data.revision

async function listen(ta: TestApp): Promise<number> {
  await ta.app.listen({ port: 0, host: '127.0.0.1' })
  return (ta.app.server.address() as AddressInfo).port
}

t.test(`the poll lists every kind with its revision, time and actor (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const start = (await poll(ta, 'limit=1000')).body.data.next_after
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  t.equal((await roleGrant(ta, 'clerk', 'orders', 'refund', 'm1')).statusCode, 200)
  const expires = new Date(Date.now() + 3_600_000).toISOString()
  const userCall = (verb: 'grant' | 'deny' | 'revoke', data: Record<string, string>) =>
    ta.call({ method: verb === 'revoke' ? 'DELETE' : 'POST', url: `/v2/admin/permissions/users/${clerk.id}/${verb}`, body: { command: `${verb}-user-permission`, data } })
  t.equal((await userCall('grant', { obj: 'orders', act: 'read', expires_at: expires })).statusCode, 200)
  t.equal((await userCall('deny', { obj: 'orders', act: 'cancel' })).statusCode, 200)
  t.equal((await userCall('revoke', { obj: 'orders', act: 'cancel' })).statusCode, 200)
  t.equal(
    (await ta.call({ method: 'DELETE', url: '/v2/admin/permissions/roles/clerk/revoke', body: { command: 'revoke-role-permission', data: { obj: 'orders', act: 'refund', domain: 'm1' } } }))
      .statusCode,
    200,
  )
  const account = (what: string, body: unknown) => ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk.id}/${what}`, body })
  t.equal((await account('sub-role', { command: 'change-sub-role', data: { sub_role_code: 'cashier' } })).statusCode, 200)
  t.equal((await account('deactivate', { command: 'deactivate-admin', data: {} })).statusCode, 200)
  t.equal((await account('reactivate', { command: 'reactivate-admin', data: {} })).statusCode, 200)

  const { status, body } = await poll(ta, `after=${start}`)
  t.equal(status, 200)
  const shape = body.data.items.map(({ kind, user_id, sub_role, obj, act, effect, event, domain }) => ({ kind, user_id, sub_role, obj, act, effect, event, domain }))
  t.same(shape, [
    { kind: 'assignment', user_id: owner.id, sub_role: 'super_admin', domain: 'm1' },
    { kind: 'assignment', user_id: clerk.id, sub_role: 'clerk', domain: 'm1' },
    { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', effect: 'allow', domain: 'm1' },
    { kind: 'user_grant', user_id: clerk.id, obj: 'orders', act: 'read', effect: 'allow', domain: 'm1' },
    { kind: 'user_deny', user_id: clerk.id, obj: 'orders', act: 'cancel', effect: 'deny', domain: 'm1' },
    { kind: 'user_revoke', user_id: clerk.id, obj: 'orders', act: 'cancel', effect: 'deny', domain: 'm1' },
    { kind: 'role_revoke', sub_role: 'clerk', obj: 'orders', act: 'refund', effect: 'allow', domain: 'm1' },
    { kind: 'assignment', user_id: clerk.id, sub_role: 'cashier', domain: 'm1' },
    { kind: 'account_status', user_id: clerk.id, event: 'deactivated', domain: 'm1' },
    { kind: 'account_status', user_id: clerk.id, event: 'reactivated', domain: 'm1' },
  ])
  const items = body.data.items
  t.equal(items[3]?.expires_at, expires, "an override's expiry is listed")
  t.ok(items.every((i) => i.actor_id === ta.root.id), 'every item names its actor')
  t.ok(items.every((i) => Math.abs(Date.parse(i.time) - Date.now()) < 60_000), 'and its time')
  const revisions = items.map((i) => i.revision)
  t.same(revisions, [...revisions].sort((a, b) => a - b), 'oldest first')
  t.equal(body.data.next_after, ta.service.replica.revision, 'a page that is not full reaches the current revision')
  t.equal(body.data.horizon, 1, 'nothing pruned: every revision is listed')

  // The catalog sync of the first start is one revision of many items: a page of 1 finishes it.
  const first = await poll(ta, 'after=0&limit=1')
  const catalog = first.body.data.items
  t.ok(catalog.length > 1 && catalog.every((i) => i.kind === 'catalog' && i.event === 'added' && i.actor_id === 'system'), 'the catalog revision whole')
  t.equal(new Set(catalog.map((i) => i.revision)).size, 1, 'one revision')
  t.equal(first.body.data.next_after, catalog[0]?.revision, 'next_after is the last revision on a full page')
  const second = await poll(ta, `after=${first.body.data.next_after}&limit=1`)
  t.ok((second.body.data.items[0]?.revision ?? 0) > first.body.data.next_after, 'the next page starts after it')

  t.equal((await poll(ta, `after=${start}&domain=global`)).body.data.items.length, 0, 'the domain filter')
})

t.test(`merchants see their own changes and global ones, never another merchant's (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const owner1 = await onboard(ta, 'm1')
  const owner2 = await onboard(ta, 'm2')
  const clerk2 = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk', merchant_id: 'm2' })
  const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'support' })
  await roleGrant(ta, 'clerk', 'orders', 'read', 'm1')
  await roleGrant(ta, 'clerk', 'orders', 'read', 'm2')
  await roleGrant(ta, 'clerk', 'orders', 'read', 'global')
  await ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk2.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })
  await ta.call({ method: 'POST', url: `/v2/admin/accounts/${staff.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })

  const seen = async (owner: Account) => (await poll(ta, 'after=0&limit=1000', ta.tokenFor(owner))).body.data.items
  const m1 = await seen(owner1)
  const m2 = await seen(owner2)
  const all = (await poll(ta, 'after=0&limit=1000')).body.data.items
  const other = (items: Item[], merchant: string) => items.filter((i) => i.domain !== merchant && i.domain !== 'global')
  t.same(other(m1, 'm1'), [], 'm1 sees nothing of m2')
  t.same(other(m2, 'm2'), [], 'm2 sees nothing of m1')
  t.notOk(m1.some((i) => i.user_id === clerk2.id || i.user_id === owner2.id), "not another merchant's assignments or account status")
  t.ok(m2.some((i) => i.kind === 'account_status' && i.user_id === clerk2.id), 'its own account status')
  t.notOk([...m1, ...m2].some((i) => i.user_id === staff.id), "never a staff account's changes")
  t.ok(m1.some((i) => i.kind === 'role_grant' && i.domain === 'global'), 'global role rules')
  t.ok(m1.some((i) => i.kind === 'catalog'), 'the catalog')
  t.ok(all.some((i) => i.user_id === staff.id) && all.some((i) => i.user_id === clerk2.id), 'a system owner sees everything')
  t.same((await poll(ta, 'after=0&domain=m2', ta.tokenFor(owner1))).body.data.items, [], "asking for another merchant's domain shows nothing")
})

t.test(`an after that is not a revision is 400; one older than the horizon 410 with where to resume (${backend})`, async (t) => {
  const ta = await buildTestApp(t, { env: { CHANGE_RETENTION_DAYS: '0' } })
  await roleGrant(ta, 'clerk', 'orders', 'read', 'global')
  await roleGrant(ta, 'clerk', 'orders', 'refund', 'global')
  const head = ta.service.replica.revision
  for (const after of ['abc', '-1', '1e3', String(head + 1)]) {
    const { status, body } = await poll(ta, `after=${after}`)
    t.same([status, body.response_code], [400, '122'], `after=${after}`)
  }
  const expired = await poll(ta, 'after=0')
  t.same([expired.status, expired.body.response_code, expired.body.resume_after], [410, '508', head], '410 names the revision to resume after')
  const kept = await poll(ta, `after=${head - 1}`)
  t.equal(kept.status, 200, 'the current revision is kept')
  t.same(kept.body.data.items.map((i) => [i.revision, i.obj, i.act]), [[head, 'orders', 'refund']])
  t.equal(kept.body.data.horizon, head, 'the horizon is the oldest revision listed')
  const { rows } = await ta.service.db.query<{ n: string }>('SELECT count(*)::text AS n FROM change_items WHERE revision < $1', [head])
  t.equal(rows[0]?.n, '0', 'nothing older is kept')
})

t.test(`a poll of 1,000 changes (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const start = ta.service.replica.revision
  const pairs = ['orders:read', 'orders:refund', 'orders:cancel', 'payouts:read', 'payouts:approve', 'customers:read', 'customers:export', 'products:read', 'products:write', 'reports:read']
  // Ten at a time: 1,000 grants, each its own revision.
  for (let i = 0; i < 100; i++) {
    const answers = await Promise.all(pairs.map((pair) => roleGrant(ta, `r${i}`, pair.split(':')[0] ?? '', pair.split(':')[1] ?? '', 'global')))
    for (const res of answers) if (res.statusCode !== 200) t.fail(res.body)
  }
  const timed = async () => {
    const began = performance.now()
    const answer = await poll(ta, `after=${start}&limit=1000`)
    return { ...answer, ms: performance.now() - began }
  }
  // The first answer of a route compiles its serializer.
  const cold = await timed()
  const { status, body, ms } = await timed()
  t.same(cold.body, body, 'the same page twice')
  t.equal(status, 200)
  t.equal(body.data.items.length, 1000, '1,000 items on one page')
  t.equal(new Set(body.data.items.map((i) => `${i.revision}.${i.index}`)).size, 1000, 'each once')
  t.equal(body.data.next_after, body.data.items[999]?.revision)
  const read = performance.now()
  await readChangeItems(ta.service.db, { revision: start, index: WHOLE_REVISION }, { audience: null, domain: null, upTo: null }, 1000)
  const readMs = performance.now() - read
  t.comment(`a poll of 1,000 changes: ${ms.toFixed(1)} ms (its query ${readMs.toFixed(1)} ms), the route's first ${cold.ms.toFixed(1)} ms (${backend})`)
  t.equal((await poll(ta, `after=${body.data.next_after}`)).body.data.items.length, 0, 'and nothing after')
})

t.test(`the stream: catch-up, live changes, Last-Event-ID, heartbeats, limits, shutdown (${backend})`, async (t) => {
  const ta = await buildTestApp(t, { env: { CHANGE_STREAM_HEARTBEAT_MS: '50', CHANGE_STREAM_MAX_MS: '60000', CHANGE_STREAMS_PER_ADDRESS: '3' } })
  const port = await listen(ta)
  const start = ta.service.replica.revision
  const first = await roleGrant(ta, 'clerk', 'orders', 'read', 'global')
  const a = await openSse(port, `/v2/admin/changes/stream?after=${start}`, ta.rootToken)
  t.equal(a.status, 200)
  t.match(a.headers['content-type'], /^text\/event-stream/)
  await a.until((c) => c.events.length === 1)
  t.equal(a.events[0]?.id, `${revisionOf(first)}.0`, 'id: <revision>.<index>')
  t.match(JSON.parse(a.events[0]?.data ?? '{}'), { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'read' })

  const began = Date.now()
  await roleGrant(ta, 'clerk', 'orders', 'refund', 'global')
  await a.until((c) => c.events.length === 2, 2000)
  t.ok(Date.now() - began < 1000, `a new change is pushed (${Date.now() - began} ms)`)
  await a.until((c) => c.comments.filter((x) => x === 'heartbeat').length >= 2, 2000)
  t.pass('a comment line every heartbeat')

  // Last-Event-ID resumes right after that event, and wins over after.
  await roleGrant(ta, 'clerk', 'orders', 'cancel', 'global')
  await a.until((c) => c.events.length === 3)
  const b = await openSse(port, '/v2/admin/changes/stream?after=0', ta.rootToken, { 'last-event-id': a.events[0]?.id ?? '' })
  await b.until((c) => c.events.length === 2)
  t.same(
    b.events.map((e) => e.id),
    a.events.slice(1).map((e) => e.id),
  )
  const c = await openSse(port, '/v2/admin/changes/stream', ta.rootToken, { 'last-event-id': 'nonsense' })
  t.same([c.status, (JSON.parse(c.body) as { response_code: string }).response_code], [400, '123'], 'a Last-Event-ID that is not an event')

  const third = await openSse(port, `/v2/admin/changes/stream?after=${start}`, ta.rootToken)
  t.equal(third.status, 200)
  const fourth = await openSse(port, `/v2/admin/changes/stream?after=${start}`, ta.rootToken)
  t.same([fourth.status, (JSON.parse(fourth.body) as { response_code: string }).response_code], [429, '608'], 'one address past its streams is refused')
  third.close()
  await new Promise((r) => setTimeout(r, 100))
  const fifth = await openSse(port, `/v2/admin/changes/stream?after=${ta.service.replica.revision}`, ta.rootToken)
  t.equal(fifth.status, 200, 'a closed stream frees its place')

  const closing = Date.now()
  await ta.app.close()
  t.ok(Date.now() - closing < 5000, `the server closes at once, its streams ended (${Date.now() - closing} ms)`)
  await a.until((x) => x.ended && b.ended && fifth.ended, 3000)
  t.ok(a.completed && b.completed && fifth.completed, 'every stream ends cleanly at shutdown')
})

t.test(`a reader that stops reading is disconnected, not buffered without limit (${backend})`, async (t) => {
  const ta = await buildTestApp(t, { env: { CHANGE_STREAM_BUFFER_BYTES: '65536', CHANGE_STREAM_MAX_MS: '60000' } })
  const port = await listen(ta)
  const slow = await openSse(port, `/v2/admin/changes/stream?after=${ta.service.replica.revision}`, ta.rootToken)
  await slow.until((c) => c.comments.includes('open'))
  slow.response.pause()
  // One revision of 10,000 wide items (about 13 MB of events, several times what the loopback socket's buffers
  // take in while the reader is paused), written as a write would be.
  const db = ta.service.db
  await db.transaction(async (tx) => {
    const { rows } = await tx.query<{ revision: string }>('UPDATE store_revision SET revision = revision + 1 WHERE id = 1 RETURNING revision::text AS revision')
    const revision = Number(rows[0]?.revision)
    await tx.query("INSERT INTO store_changes (revision, write_id, changes) VALUES ($1, gen_random_uuid(), '[]'::jsonb)", [revision])
    await tx.query(
      `INSERT INTO change_items (revision, idx, kind, domain, audience, sub_role, obj, act, effect, actor_id)
       SELECT $1, i, 'role_grant', 'global', '*', 'r' || i, repeat('o', 1200), 'read', 'allow', 'system' FROM generate_series(0, 9999) AS i`,
      [revision],
    )
  })
  await ta.service.replica.sync()
  const { rows } = await db.query<{ n: string }>('SELECT count(*)::text AS n FROM change_items')
  t.ok(Number(rows[0]?.n) >= 10_000)
  // The revision's events reach the paused reader's buffer (all of them are written at once): from then on it has a second to read.
  await slow.until((c) => c.response.readableLength > 0, 20_000)
  await new Promise((r) => setTimeout(r, 1500))
  slow.response.resume()
  await slow.until((c) => c.ended, 10_000)
  t.ok(slow.events.length < 10_000, `disconnected after ${slow.events.length} of 10,000 events`)
})

t.test(`a stream ends once its caller may no longer read: logout, permission revoked, deactivation, credentials changed, expiry (${backend})`, async (t) => {
  const ta = await buildTestApp(t, { env: { CHANGE_STREAM_HEARTBEAT_MS: '50', CHANGE_STREAM_MAX_MS: '60000', CHANGE_STREAMS_PER_ADDRESS: '10' } })
  const port = await listen(ta)
  await onboard(ta, 'm1')
  const reader = await register(ta, { email: 'reader@m1.example', sub_role_code: 'reader', merchant_id: 'm1' })
  t.equal((await roleGrant(ta, 'reader', 'permission', 'read', 'm1')).statusCode, 200)
  const open = async (token: string) => {
    const stream = await openSse(port, `/v2/admin/changes/stream?after=${ta.service.replica.revision}`, token)
    t.equal(stream.status, 200)
    await stream.until((c) => c.comments.includes('heartbeat'))
    return stream
  }
  /** The stream's last event is `event: error` with this code, and the server ended it. */
  const endsWith = async (stream: Awaited<ReturnType<typeof open>>, code: string, why: string) => {
    await stream.until((c) => c.ended, 3000)
    const last = stream.events[stream.events.length - 1]
    t.equal(last?.event, 'error', `${why}: a last error event`)
    t.match(JSON.parse(last?.data ?? '{}'), { response_code: code, response_text: String }, `${why}: ${code}`)
    t.ok(stream.completed, `${why}: the server closed the stream`)
  }

  const loggedOut = await open(ta.tokenFor(reader))
  const stays = await open(ta.tokenFor(reader))
  const logout = await ta.call({ method: 'POST', url: '/v2/auth/logout', token: ta.tokenFor(reader), body: { command: 'logout', data: {} } })
  t.equal(logout.statusCode, 200)
  t.notOk(loggedOut.ended, 'another token of the same account logged out: the stream stays')
  loggedOut.close()
  const ending = ta.tokenFor(reader)
  const endedStream = await open(ending)
  t.equal((await ta.call({ method: 'POST', url: '/v2/auth/logout', token: ending, body: { command: 'logout', data: {} } })).statusCode, 200)
  await endsWith(endedStream, '204', 'its token logged out')
  t.notOk(stays.ended, "the account's other token keeps its stream")

  const revoked = await open(ta.tokenFor(reader))
  const revoke = { command: 'revoke-role-permission', data: { obj: 'permission', act: 'read', domain: 'm1' } }
  t.equal((await ta.call({ method: 'DELETE', url: '/v2/admin/permissions/roles/reader/revoke', body: revoke })).statusCode, 200)
  await endsWith(revoked, '300', 'permission:read revoked')
  t.notOk(revoked.events.some((e) => e.event !== 'error'), 'the revoke itself is not delivered to the caller who lost the right to read it')
  await endsWith(stays, '300', 'permission:read revoked (the other token)')

  t.equal((await roleGrant(ta, 'reader', 'permission', 'read', 'm1')).statusCode, 200)
  const second = await register(ta, { email: 'second@m1.example', sub_role_code: 'reader', merchant_id: 'm1' })
  const deactivated = await open(ta.tokenFor(second))
  t.equal((await ta.call({ method: 'POST', url: `/v2/admin/accounts/${second.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })).statusCode, 200)
  await endsWith(deactivated, '201', 'its account deactivated')

  const third = await register(ta, { email: 'third@m1.example', sub_role_code: 'reader', merchant_id: 'm1' })
  const moved = await open(ta.tokenFor(third))
  const everywhere = await ta.call({ method: 'POST', url: '/v2/auth/logout', token: ta.tokenFor(third), body: { command: 'logout', data: { everywhere: true } } })
  t.equal(everywhere.statusCode, 200)
  await endsWith(moved, '201', "its account's credentials changed (a logout everywhere)")

  // A token of the root account that expires in about two seconds, signed as the service signs its own.
  const sign = createSigner({ key: TEST_SECRET, algorithm: 'HS256', noTimestamp: true })
  const exp = Math.ceil(Date.now() / 1000) + 2
  const shortLived = sign({ sub: ta.root.id, principal_type: ta.root.principal_type, cv: ta.root.credentials_version ?? 0, jti: 'short-lived', exp })
  const expiring = await open(shortLived)
  await endsWith(expiring, '202', 'its token expired')
  t.ok(Date.now() >= exp * 1000, 'not before its expiry')
})

t.test(`the stream's answer carries the headers a route's answer carries: the service's, helmet's, cross-origin (${backend})`, async (t) => {
  const origin = 'https://console.example'
  const ta = await buildTestApp(t, { env: { CORS_ORIGINS: origin, CHANGE_STREAM_MAX_MS: '60000' } })
  const port = await listen(ta)
  const sent = { origin, 'x-request-id': 'client-id-1' }
  const poll = await fetch(`http://127.0.0.1:${port}/v2/admin/changes`, { headers: { authorization: `Bearer ${ta.rootToken}`, ...sent } })
  t.equal(poll.status, 200)
  const stream = await openSse(port, '/v2/admin/changes/stream', ta.rootToken, sent)
  t.equal(stream.status, 200)
  stream.close()
  // What differs by nature: the body's type and length, and what only a stream says.
  const ownToEither = new Set(['content-type', 'content-length', 'transfer-encoding', 'date', 'cache-control', 'x-accel-buffering'])
  const routeHeaders = Object.fromEntries([...poll.headers].filter(([name]) => !ownToEither.has(name)))
  const streamHeaders = Object.fromEntries(Object.entries(stream.headers).filter(([name]) => !ownToEither.has(name)))
  t.same(streamHeaders, routeHeaders, 'the same headers with the same values')
  t.match(streamHeaders, {
    'x-request-id': 'client-id-1',
    'x-content-type-options': 'nosniff',
    'x-policy-revision': String(ta.service.replica.revision),
    'content-security-policy': String,
    'strict-transport-security': String,
    'x-frame-options': 'SAMEORIGIN',
    'access-control-allow-origin': origin,
  })
})
