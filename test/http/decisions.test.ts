/**
 * GET /v2/admin/decisions: the denial trail the `postgres` decision sink
 * stores, newest first, every filter, keyset paging by an opaque cursor,
 * and merchant callers confined to their own merchant's users (both ways).
 */
import t from 'tap'
import type { DecisionEvent } from '../../src/decisionLog/event.js'
import { insertDecisionEvents } from '../../src/storage/decisionEvents.js'
import { buildTestApp, onboard, register } from '../helper.js'
import { decisionEvent } from '../support/decisionEvents.js'

interface Page {
  items: DecisionEvent[]
  next_cursor: string | null
}

t.test('list-decisions', async (t) => {
  const ta = await buildTestApp(t)
  const m1 = await onboard(ta, 'm1')
  const m2 = await onboard(ta, 'm2')
  const clerk1 = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(m1))
  const clerk2 = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk' }, ta.tokenFor(m2))
  // A merchant reader without root: permission:read granted to its sub-role.
  const reader1 = await register(ta, { email: 'reader@m1.example', sub_role_code: 'auditor' }, ta.tokenFor(m1))
  await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/auditor/grant',
    token: ta.tokenFor(m1),
    body: { command: 'grant-role-permission', data: { obj: 'permission', act: 'read' } },
  })

  const at = (second: number) => `2030-03-01T10:00:${String(second).padStart(2, '0')}.000000Z`
  const events: DecisionEvent[] = [
    decisionEvent(clerk1, { decision_id: 'a0', time: at(0), allowed: false }),
    decisionEvent(clerk1, { decision_id: 'a1', time: at(1), allowed: true, act: 'read', reason: { kind: 'role', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] } }),
    decisionEvent(clerk2, { decision_id: 'b2', time: at(2), allowed: false }),
    decisionEvent(ta.root, { decision_id: 'c3', time: at(3), allowed: false, obj: 'merchant', act: 'onboard' }),
    decisionEvent(clerk1, { decision_id: 'a4.0', time: at(4), allowed: false, source: 'check_batch', method: 'GET', path: '/orders/1' }),
    decisionEvent(clerk1, { decision_id: 'a4.1', time: at(4), allowed: false, source: 'check_batch', caller_id: m1.id }),
    decisionEvent(clerk2, { decision_id: 'b5', time: at(5), allowed: true, act: 'read', shadow: { allowed: false, reason: { kind: 'none' } } }),
  ]
  await insertDecisionEvents(ta.service.db, events)
  const byId = new Map(events.map((e) => [e.decision_id, e]))

  const list = async (query: string, token = ta.rootToken) => {
    const res = await ta.call({ method: 'GET', url: `/v2/admin/decisions${query}`, token })
    return { status: res.statusCode, body: res.json() as { response_code: string; data: Page } }
  }
  const ids = async (query: string, token = ta.rootToken) => {
    const { status, body } = await list(query, token)
    t.equal(status, 200, `GET ${query}`)
    return body.data.items.map((e) => e.decision_id)
  }

  t.test('newest first, the whole event, and the filters', async (t) => {
    const { body } = await list('')
    t.same(body.data.items.map((e) => e.decision_id), ['b5', 'a4.1', 'a4.0', 'c3', 'b2', 'a1', 'a0'])
    t.equal(body.data.next_cursor, null)
    for (const item of body.data.items) t.same(item, byId.get(item.decision_id), `${item.decision_id} as written`)
    t.same(await ids(`?user_id=${clerk1.id}`), ['a4.1', 'a4.0', 'a1', 'a0'])
    t.same(await ids('?allowed=false'), ['a4.1', 'a4.0', 'c3', 'b2', 'a0'])
    t.same(await ids('?allowed=true&act=read'), ['b5', 'a1'])
    t.same(await ids('?obj=merchant'), ['c3'])
    t.same(await ids('?domain=m2'), ['b5', 'b2'])
    t.same(await ids('?decision_id=a4.0'), ['a4.0'])
    t.same(await ids(`?from=${at(1)}&to=${at(4)}`), ['c3', 'b2', 'a1'], 'from inclusive, to exclusive')
    t.same(await ids(`?from=2030-03-01T11:00:02%2B01:00`), ['b5', 'a4.1', 'a4.0', 'c3', 'b2'], 'an offset is an instant')
  })

  t.test('paged by an opaque cursor: every event once, in order', async (t) => {
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const { body }: { body: { data: Page } } = await list(`?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`)
      seen.push(...body.data.items.map((e) => e.decision_id))
      cursor = body.data.next_cursor
      pages++
    } while (cursor !== null && pages < 10)
    t.same(seen, ['b5', 'a4.1', 'a4.0', 'c3', 'b2', 'a1', 'a0'])
    t.equal(pages, 4)
    const { body } = await list('?limit=1&allowed=false')
    t.same(await ids(`?limit=2&allowed=false&cursor=${body.data.next_cursor}`), ['a4.0', 'c3'], 'the cursor keeps the filters the caller sends')
  })

  t.test('a cursor the list did not give is 400 114; limits are bounded', async (t) => {
    for (const bad of ['bm90LWpzb24', Buffer.from('["yesterday","a0"]').toString('base64url'), Buffer.from('{"a":1}').toString('base64url'), Buffer.from('["2030-03-01T10:00:00.000000Z",""]').toString('base64url'), Buffer.from('["2030-02-31T10:00:00.000000Z","a0"]').toString('base64url')]) {
      const { status, body } = await list(`?cursor=${bad}`)
      t.equal(status, 400, bad)
      t.equal(body.response_code, '114', bad)
    }
    t.equal((await list('?cursor=not%20base64')).body.response_code, '100', 'not even the shape: a validation error')
    t.equal((await list('?limit=0')).status, 400)
    t.equal((await list('?limit=201')).status, 400)
    t.equal((await list('?limit=200')).status, 200)
    t.equal((await list('?user_id=not-a-uuid')).status, 400)
    t.equal((await list('?from=yesterday')).status, 400)
  })

  t.test('merchant callers see only their own merchant users, both ways', async (t) => {
    t.same(await ids('', ta.tokenFor(m1)), ['a4.1', 'a4.0', 'a1', 'a0'], 'm1 sees m1 users only')
    t.same(await ids('', ta.tokenFor(m2)), ['b5', 'b2'], 'm2 sees m2 users only')
    t.same(await ids('', ta.tokenFor(reader1)), ['a4.1', 'a4.0', 'a1', 'a0'], 'a reader of m1 as well')
    t.same(await ids(`?user_id=${clerk2.id}`, ta.tokenFor(m1)), [], "another merchant's user: nothing")
    t.same(await ids(`?user_id=${ta.root.id}`, ta.tokenFor(m2)), [], 'a system user: nothing')
    t.same(await ids('?domain=m2', ta.tokenFor(m1)), [])
    t.same(await ids('?decision_id=b2', ta.tokenFor(m1)), [])
    // A cursor taken from the root's list does not widen a merchant's view.
    const { body } = await list('?limit=1')
    t.same(await ids(`?cursor=${body.data.next_cursor}`, ta.tokenFor(m2)), ['b2'])
  })

  t.test('permission:read is needed', async (t) => {
    const { status, body } = await list('', ta.tokenFor(clerk1))
    t.equal(status, 403)
    t.equal(body.response_code, '300')
  })
})
