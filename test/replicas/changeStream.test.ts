/**
 * The change stream across replicas: while two replicas over one PostgreSQL
 * write, a reader follows one replica's stream through reconnects
 * (Last-Event-ID) and sees every change exactly once, in the order of the
 * audit trail; and a change written through one replica reaches a stream of
 * the other within a bound.
 */
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { backend, buildTestApp, freshDatabase, onboard, register, secondConnection, type TestApp } from '../helper.js'
import { openSse, type SseConnection, type SseEvent } from '../support/sseClient.js'

const skip = backend === 'postgres' ? false : 'several replicas need PostgreSQL (DATABASE_URL=postgres://…)'

/** A long poll, so what the other replica learns comes from the notification. */
const ENV = { REVISION_POLL_MS: '60000', CHANGE_STREAM_MAX_MS: '60000' }

const roleGrant = (ta: TestApp, role: string, obj: string, act: string) =>
  ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, body: { command: 'grant-role-permission', data: { obj, act, domain: 'global' } } })

async function listen(ta: TestApp): Promise<number> {
  await ta.app.listen({ port: 0, host: '127.0.0.1' })
  return (ta.app.server.address() as AddressInfo).port
}

interface Item {
  revision: number
  index: number
  kind: string
  sub_role?: string
  obj?: string
  act?: string
}

t.test('a reader following one replica through reconnects sees every change of both exactly once', { skip }, async (t) => {
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: ENV })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: ENV })
  const port = await listen(b)
  const start = b.service.replica.revision
  const auditStart = (await db.query<{ id: string }>('SELECT COALESCE(max(id), 0)::text AS id FROM permission_audit')).rows[0]?.id ?? '0'

  const received: SseEvent[] = []
  let writing = true
  let reconnects = 0
  const reader = (async () => {
    let lastId: string | undefined
    for (;;) {
      const headers: Record<string, string> = lastId === undefined ? {} : { 'last-event-id': lastId }
      const stream = await openSse(port, `/v2/admin/changes/stream?after=${start}`, b.rootToken, headers)
      if (stream.status !== 200) throw new Error(`stream refused: ${stream.status} ${stream.body}`)
      // Read a few events, then drop the connection as a flaky network would.
      const until = received.length + 7
      const head = async () => (await db.query<{ r: string }>('SELECT revision::text AS r FROM store_revision')).rows[0]?.r
      for (;;) {
        for (const event of stream.events.splice(0)) {
          received.push(event)
          lastId = event.id
        }
        if (received.length >= until) break
        const last = received[received.length - 1]?.id?.split('.')[0]
        if (!writing && last === (await head())) {
          stream.close()
          return
        }
        await new Promise((r) => setTimeout(r, 10))
      }
      stream.close()
      reconnects++
    }
  })()

  const pairs = ['orders:read', 'orders:refund', 'orders:cancel', 'payouts:read', 'payouts:approve']
  const writer = async (ta: TestApp, name: string) => {
    for (let i = 0; i < 40; i++) {
      const [obj = '', act = ''] = (pairs[i % pairs.length] ?? '').split(':')
      const res = await roleGrant(ta, `${name}${Math.floor(i / pairs.length)}`, obj, act)
      if (res.statusCode !== 200) throw new Error(res.body)
    }
  }
  await Promise.all([writer(a, 'a'), writer(b, 'b')])
  writing = false
  await reader

  const ids = received.map((e) => e.id)
  t.equal(new Set(ids).size, ids.length, `no change repeated over ${reconnects} reconnects`)
  const items = received.map((e) => JSON.parse(e.data) as Item)
  const polled = (await a.call({ method: 'GET', url: `/v2/admin/changes?after=${start}&limit=1000` })).json() as { data: { items: Item[] } }
  t.same(
    ids,
    polled.data.items.map((i) => `${i.revision}.${i.index}`),
    'the same changes as a poll of the other replica, in order',
  )
  const audit = await db.query<{ action: string; target_id: string; obj: string; act: string }>(
    "SELECT action, target_id, obj, act FROM permission_audit WHERE id > $1::bigint AND action = 'grant' ORDER BY id",
    [auditStart],
  )
  t.equal(audit.rows.length, 80, 'every write audited')
  t.same(
    items.map((i) => [i.kind, i.sub_role, i.obj, i.act]),
    audit.rows.map((r) => ['role_grant', r.target_id, r.obj, r.act]),
    'every change of the audit trail, once, in its order',
  )
  t.ok(reconnects >= 5, `the reader reconnected ${reconnects} times`)
})

t.test("a change through one replica reaches a stream on the other within a bound", { skip }, async (t) => {
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: ENV })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: ENV })
  const port = await listen(b)
  const stream = await openSse(port, `/v2/admin/changes/stream?after=${b.service.replica.revision}`, b.rootToken)
  const delays: number[] = []
  for (let i = 0; i < 20; i++) {
    const res = await roleGrant(a, `d${i}`, 'orders', 'read')
    const committed = Date.now()
    await stream.until((s) => s.events.length === i + 1, 5000)
    delays.push(Date.now() - committed)
    t.equal(JSON.parse(stream.events[i]?.data ?? '{}').revision, (res.json() as { data: { revision: number } }).data.revision)
  }
  stream.close()
  delays.sort((x, y) => x - y)
  t.comment(`delivery to the other replica's stream after the writer's answer: median ${delays[10]} ms, max ${delays[19]} ms`)
  t.ok((delays[19] ?? Infinity) < 1000, 'every change within a second, by notification')
})

t.test('a stream on one replica ends when the other revokes its caller: permission:read, then a logout', { skip }, async (t) => {
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: { ...ENV, CHANGE_STREAM_HEARTBEAT_MS: '100' } })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: { ...ENV, CHANGE_STREAM_HEARTBEAT_MS: '100' } })
  const port = await listen(b)
  await onboard(a, 'm1')
  const reader = await register(a, { email: 'reader@m1.example', sub_role_code: 'reader', merchant_id: 'm1' })
  const grant = { command: 'grant-role-permission', data: { obj: 'permission', act: 'read', domain: 'm1' } }
  t.equal((await a.call({ method: 'POST', url: '/v2/admin/permissions/roles/reader/grant', body: grant })).statusCode, 200)
  await b.service.replica.sync()
  const open = async (token: string) => {
    const stream = await openSse(port, `/v2/admin/changes/stream?after=${b.service.replica.revision}`, token)
    t.equal(stream.status, 200)
    await stream.until((s) => s.comments.includes('heartbeat'))
    return stream
  }
  const endsWith = async (stream: SseConnection, code: string, why: string) => {
    await stream.until((s) => s.ended, 5000)
    const last = stream.events[stream.events.length - 1]
    t.equal(last?.event, 'error', `${why}: a last error event`)
    t.equal((JSON.parse(last?.data ?? '{}') as { response_code?: string }).response_code, code, `${why}: ${code}`)
    t.ok(stream.completed, `${why}: the server closed the stream`)
  }

  const revoked = await open(a.tokenFor(reader))
  const revoke = { command: 'revoke-role-permission', data: { obj: 'permission', act: 'read', domain: 'm1' } }
  t.equal((await a.call({ method: 'DELETE', url: '/v2/admin/permissions/roles/reader/revoke', body: revoke })).statusCode, 200)
  await endsWith(revoked, '300', 'permission:read revoked on the other replica')
  t.notOk(revoked.events.some((e) => e.event !== 'error'), 'nothing delivered after the revoke')

  t.equal((await a.call({ method: 'POST', url: '/v2/admin/permissions/roles/reader/grant', body: grant })).statusCode, 200)
  await b.service.replica.sync()
  const token = a.tokenFor(reader)
  const loggedOut = await open(token)
  t.equal((await a.call({ method: 'POST', url: '/v2/auth/logout', token, body: { command: 'logout', data: {} } })).statusCode, 200)
  await endsWith(loggedOut, '204', 'its token logged out on the other replica')
})
