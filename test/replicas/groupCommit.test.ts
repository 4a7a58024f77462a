/**
 * Group commit with two replicas over one PostgreSQL: bursts of single
 * grants on both share transactions on each, every write reaches the other
 * replica, both end at the same revision with the same rules, and the audit
 * chain both wrote into verifies.
 */
import t from 'tap'
import { verifyAudit } from '../../src/commands/verifyAudit.js'
import { currentRevision } from '../../src/storage/revision.js'
import { backend, buildTestApp, freshDatabase, secondConnection } from '../helper.js'
import { eventually } from '../support/eventually.js'
import { roleCommand } from '../support/permissionCommands.js'

const skip = backend === 'postgres' ? false : 'several replicas need PostgreSQL (DATABASE_URL=postgres://…)'
/** A long poll, so what each replica learns of the other's writes comes from the notification. */
const ENV = { REVISION_POLL_MS: '60000' }
const PER_REPLICA = 60

t.test('bursts on two replicas: shared transactions, every write on both, one chain', { skip }, async (t) => {
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: ENV })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: ENV })
  const before = await currentRevision(db)
  const rule = (name: string) => [name, 'global', 'orders', 'read', 'allow']
  const names = { a: Array.from({ length: PER_REPLICA }, (_, i) => `a_${i}`), b: Array.from({ length: PER_REPLICA }, (_, i) => `b_${i}`) }
  const replies = await Promise.all([
    ...names.a.map((name) => roleCommand(a, 'grant', name, { obj: 'orders', act: 'read', domain: 'global' })),
    ...names.b.map((name) => roleCommand(b, 'grant', name, { obj: 'orders', act: 'read', domain: 'global' })),
  ])
  t.same(replies.filter((r) => r.statusCode !== 200).map((r) => r.body), [], 'every write answered 200')
  const revisions = replies.map((r) => (r.json().data as { revision: number }).revision)
  const head = await currentRevision(db)
  t.ok(head - before < 2 * PER_REPLICA, `writes shared transactions: ${2 * PER_REPLICA} writes made ${head - before} revisions`)
  t.equal(new Set(revisions).size, head - before, 'each revision answered is one the writes made')
  const all = [...names.a, ...names.b]
  for (const [name, replica] of [['A', a], ['B', b]] as const) {
    const caughtUp = await eventually(() => replica.service.replica.revision >= head)
    t.ok(caughtUp, `${name} reached the head revision`)
    t.same(all.filter((n) => replica.service.engine.policy.hasPolicy(rule(n)) !== true), [], `${name} holds every grant`)
  }
  const audited = await db.query<{ target_id: string }>("SELECT target_id FROM permission_audit WHERE action = 'grant' ORDER BY permission_audit.id")
  t.same(audited.rows.map((r) => r.target_id).sort(), [...all].sort(), 'one audit row per write')
  const items = await db.query<{ sub_role: string }>('SELECT sub_role FROM change_items WHERE revision > $1 ORDER BY revision, idx', [before])
  t.same(items.rows.map((r) => r.sub_role), audited.rows.map((r) => r.target_id), 'the change stream lists them in the audit trail\'s order')
  t.equal((await verifyAudit(db)).problem, null, 'the chain both replicas wrote into is whole')
})
