/**
 * Two replicas over one PostgreSQL: a list of changes written through one
 * reaches the other as one revision, all of it at once. The other replica is
 * watched at every turn of its event loop while it catches up: it never
 * shows part of the list, and it steps from the revision before the list
 * straight to the list's.
 */
import t from 'tap'
import { backend, buildTestApp, freshDatabase, onboard, secondConnection } from '../helper.js'
import { EVENTUALLY_MS } from '../support/eventually.js'

const skip = backend === 'postgres' ? false : 'several replicas need PostgreSQL (DATABASE_URL=postgres://…)'
/** A long poll, so what the other replica learns comes from the notification. */
const ENV = { REVISION_POLL_MS: '60000' }
const CHANGES = 500

t.test('the other replica sees the whole list as one revision', { skip }, async (t) => {
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: ENV })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: ENV })
  await onboard(a, 'm1')
  const rule = (i: number) => [`bulk_${i}`, 'm1', 'orders', 'read', 'allow']
  const visible = () => Array.from({ length: CHANGES }, (_, i) => i).filter((i) => b.service.engine.policy.hasPolicy(rule(i)) === true).length
  const start = Date.now()
  while (b.service.replica.revision < a.service.replica.revision && Date.now() - start < EVENTUALLY_MS) await new Promise((r) => setTimeout(r, 5))
  const before = b.service.replica.revision

  const seen: Array<{ revision: number; visible: number }> = []
  let watching = true
  const watch = async () => {
    while (watching) {
      seen.push({ revision: b.service.replica.revision, visible: visible() })
      await new Promise((r) => setImmediate(r))
    }
  }
  const watcher = watch()
  const changes = Array.from({ length: CHANGES }, (_, i) => ({ kind: 'role_grant', sub_role: `bulk_${i}`, obj: 'orders', act: 'read', domain: 'm1' }))
  const res = await a.call({ method: 'POST', url: '/v2/admin/permissions/changes', body: { command: 'apply-permission-changes', data: { changes } } })
  t.equal(res.statusCode, 200, res.body.slice(0, 300))
  const { revision } = res.json().data as { revision: number }
  t.equal(revision, before + 1, 'one revision')
  const answered = Date.now()
  while (b.service.replica.revision < revision && Date.now() - answered < EVENTUALLY_MS) await new Promise((r) => setTimeout(r, 5))
  watching = false
  await watcher
  seen.push({ revision: b.service.replica.revision, visible: visible() })

  t.equal(b.service.replica.revision, revision, 'B reached the revision')
  t.equal(visible(), CHANGES, 'B holds every change')
  t.same(new Set(seen.map((s) => s.revision)), new Set([before, revision]), 'B stepped from the revision before straight to the list\'s')
  const partial = seen.filter((s) => s.visible !== 0 && s.visible !== CHANGES)
  t.same(partial, [], 'B never showed part of the list')
  t.same(seen.filter((s) => (s.revision === before) !== (s.visible === 0)), [], 'at each revision B showed all of the list or none')
})
