/**
 * Group commit: single writes queued while a transaction is in flight share
 * the next one. Each keeps its own answer and audit row, a refusal undoes
 * that write alone, a write sees the rows of the writes before it in its
 * transaction, the audit chain stays whole, and the database failing fails
 * the whole transaction and nothing of it is written.
 */
import t, { type Test } from 'tap'
import { planRoleChange } from '../../src/commands/changeRolePermission.js'
import { runPlanned } from '../../src/commands/plannedChange.js'
import { verifyAudit } from '../../src/commands/verifyAudit.js'
import { WriteQueue } from '../../src/commands/writeQueue.js'
import { ServiceError } from '../../src/domain/errors.js'
import { StorageUnavailableError, type Database, type Queryable, type Row, type TransactionOptions } from '../../src/storage/db.js'
import { LOCK_REVISION, currentRevision } from '../../src/storage/revision.js'
import { backend, buildTestApp, freshDatabase, register, secondConnection, type TestApp } from '../helper.js'
import { eventually } from '../support/eventually.js'
import { roleCommand, userCommand } from '../support/permissionCommands.js'

const roleRule = (role: string) => [role, 'global', 'reports', 'read', 'allow']
const nothing = { changed: false, audit: [], changes: [], result: null }

/**
 * Holds the queue until `open()`: a write commits, and its memory change
 * waits behind a hold of the replica, so the queue takes no next transaction
 * and the writes queued meanwhile go together. No transaction is open while
 * it holds, so requests still read the store (PGlite has one connection).
 */
async function holdQueue(t: Test, ta: TestApp): Promise<{ open: () => void }> {
  let open = () => undefined as void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  t.teardown(open)
  const start = await currentRevision(ta.service.db)
  void ta.service.replica.hold(() => opened)
  void ta.service.writes.run(async (tx) => {
    await tx.query("INSERT INTO merchants (id) VALUES ('gate')")
    return { changed: true, audit: [], changes: [{ kind: 'merchant' as const, id: 'gate' }], result: null }
  })
  if (!(await eventually(async () => (await currentRevision(ta.service.db)) > start))) throw new Error('the gate did not commit')
  return { open }
}

/** Waits until `count` writes are queued behind the one in flight. */
async function queued(writes: WriteQueue, count: number): Promise<void> {
  if (!(await eventually(() => writes.waiting >= count))) throw new Error(`${writes.waiting} writes queued, not ${count}`)
}

const stored = async (ta: TestApp, rule: string[]) =>
  (await ta.service.db.query('SELECT 1 FROM casbin_rule WHERE ptype = $1 AND v0 = $2 AND v1 = $3 AND v2 = $4 AND v3 = $5 AND v4 = $6', ['p', ...rule])).rows.length === 1
const auditCount = async (ta: TestApp, action: string) =>
  Number((await ta.service.db.query<{ n: string }>('SELECT count(*)::text AS n FROM permission_audit WHERE action = $1', [action])).rows[0]?.n)

t.test('concurrent grants share one transaction: one revision, each its own answer, audit row and change item', async (t) => {
  const ta = await buildTestApp(t)
  const clerk = await register(ta, { email: 'clerk@example.com', sub_role_code: 'clerk' })
  const writes = ta.service.writes
  const gate = await holdQueue(t, ta)
  const before = await currentRevision(ta.service.db)
  const roles = Array.from({ length: 12 }, (_, i) => `gc_${i}`)
  const answers = [
    ...roles.map((role) => roleCommand(ta, 'grant', role, { obj: 'reports', act: 'read', domain: 'global' })),
    userCommand(ta, 'grant', clerk, { obj: 'orders', act: 'read', domain: 'global' }),
  ]
  await queued(writes, answers.length)
  gate.open()
  const replies = await Promise.all(answers)
  t.same(replies.map((r) => r.statusCode), replies.map(() => 200), replies.find((r) => r.statusCode !== 200)?.body ?? 'every write answered 200')
  const revisions = new Set(replies.map((r) => (r.json().data as { revision: number }).revision))
  t.same([...revisions], [before + 1], 'every write answered the one revision their transaction made')
  t.equal(await currentRevision(ta.service.db), before + 1, 'one revision for all of them')
  t.ok(replies.every((r) => (r.json().data as { changed: boolean }).changed), 'each answered changed')
  t.equal(await auditCount(ta, 'grant'), roles.length + 1, 'each has its own audit row')
  const items = await ta.service.db.query<{ idx: number }>('SELECT idx FROM change_items WHERE revision = $1 ORDER BY idx', [before + 1])
  t.same(items.rows.map((r) => r.idx), answers.map((_, i) => i), 'each has its own change item, numbered in queue order')
  t.ok(roles.every((role) => ta.service.engine.policy.hasPolicy(roleRule(role)) === true), 'memory holds every grant')
  t.equal(ta.service.engine.policy.hasPolicy([clerk.id, 'global', 'orders', 'read', 'allow']), true, 'and the override')
  t.equal(ta.service.replica.revision, before + 1, 'memory is at the shared revision')
})

t.test('writes arriving while a transaction waits for the revision lock join that transaction', { skip: backend === 'postgres' ? false : 'another replica holding the lock needs PostgreSQL' }, async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const before = await currentRevision(db)
  // Another replica's transaction, holding the revision lock until released.
  const other = secondConnection(t, db)
  let release = () => undefined as void
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  t.teardown(release)
  const holder = new Promise<number>((resolve, reject) => {
    other
      .transaction(
        async (tx) => {
          resolve(Number((await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid))
          await released
        },
        { opening: LOCK_REVISION, budgetMs: null },
      )
      .catch(reject)
  })
  const holderPid = await holder
  const pair = { obj: 'reports', act: 'read', domain: 'global' }
  const first = roleCommand(ta, 'grant', 'late_0', pair)
  const blocked = async () => Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [holderPid])).rows[0]?.n) > 0
  t.ok(await eventually(blocked), 'the first write waits for the lock')
  const later = [roleCommand(ta, 'grant', 'late_1', pair), roleCommand(ta, 'grant', 'late_2', pair)]
  await queued(ta.service.writes, 2)
  release()
  const replies = await Promise.all([first, ...later])
  t.same(replies.map((r) => r.statusCode), [200, 200, 200])
  t.same(
    replies.map((r) => (r.json().data as { revision: number }).revision),
    [before + 1, before + 1, before + 1],
    'the writes queued during the wait went in the waiting transaction: one revision',
  )
  t.equal(await auditCount(ta, 'grant'), 3, 'each its own audit row')
  t.equal((await verifyAudit(db)).problem, null, 'the chain is whole')
})

t.test('a write sees the writes before it in its transaction: grant, grant again, revoke, grant', async (t) => {
  const ta = await buildTestApp(t)
  const ctx = ta.service
  const caller = { account: ta.root, ip: null }
  const input = { obj: 'reports', act: 'read', domain: 'global' }
  // Planned now, from memory, where the rule is absent: each write's transaction must find what the ones before it did.
  const planned = [
    await planRoleChange(ctx, caller, 'seen', input, 'grant'),
    await planRoleChange(ctx, caller, 'seen', input, 'grant'),
    await planRoleChange(ctx, caller, 'seen', input, 'revoke'),
    await planRoleChange(ctx, caller, 'seen', input, 'grant'),
  ]
  const gate = await holdQueue(t, ta)
  const before = await currentRevision(ctx.db)
  const outcomes = Promise.all(planned.map((p) => runPlanned(ctx, p, false)))
  await queued(ctx.writes, planned.length)
  gate.open()
  const answers = await outcomes
  t.same(answers.map((a) => a.changed), [true, false, true, true], 'the second grant found the first; the revoke found it too')
  t.same(answers.map((a) => a.revision), [before + 1, before + 1, before + 1, before + 1], 'one shared revision')
  t.equal(await stored(ta, roleRule('seen')), true, 'the last grant stands in the store')
  t.equal(ctx.engine.policy.hasPolicy(roleRule('seen')), true, 'and in memory')
  const actions = await ctx.db.query<{ action: string }>("SELECT action FROM permission_audit WHERE target_id = 'seen' ORDER BY permission_audit.id")
  t.same(actions.rows.map((r) => r.action), ['grant', 'revoke', 'grant'], 'an audit row for each write that changed something, in queue order')
})

t.test('a refused write among many undoes itself alone', async (t) => {
  const ta = await buildTestApp(t)
  const ctx = ta.service
  const writes = ctx.writes
  const merchantWrite = (id: string) => async (tx: Queryable) => {
    await tx.query('INSERT INTO merchants (id) VALUES ($1)', [id])
    return nothing
  }
  const gate = await holdQueue(t, ta)
  const before = await currentRevision(ctx.db)
  const answers = [
    roleCommand(ta, 'grant', 'first', { obj: 'reports', act: 'read', domain: 'global' }),
    // Refused by the service after writing a row: the row goes with it.
    writes.run(async (tx) => {
      await merchantWrite('refused_m')(tx)
      throw new ServiceError('SUB_ROLE_EXISTS', { sub_role_code: 'x' })
    }, { shared: true }),
    // Refused by the database: on PostgreSQL the transaction would be aborted without its savepoint.
    writes.run(async (tx) => {
      await merchantWrite('failed_m')(tx)
      await tx.query('INSERT INTO merchants (id) VALUES (NULL)')
      return nothing
    }, { shared: true }),
    roleCommand(ta, 'grant', 'second', { obj: 'reports', act: 'read', domain: 'global' }),
  ]
  await queued(writes, answers.length)
  gate.open()
  const [first, refused, failed, second] = await Promise.allSettled(answers)
  t.match(refused, { status: 'rejected', reason: { code: 'SUB_ROLE_EXISTS' } }, 'the refusal answers its own caller')
  t.equal(failed?.status, 'rejected', 'the database error answers its own caller')
  for (const [name, settled] of [['first', first], ['second', second]] as const) {
    const reply = settled?.status === 'fulfilled' ? (settled.value as { statusCode: number; body: string }) : null
    t.equal(reply?.statusCode, 200, `the ${name} grant is answered 200: ${reply?.body ?? ''}`)
    t.equal(await stored(ta, roleRule(name)), true, `the ${name} grant is stored`)
  }
  const merchants = await ctx.db.query("SELECT id FROM merchants WHERE id IN ('refused_m', 'failed_m')")
  t.same(merchants.rows, [], 'nothing of the refused writes is stored')
  t.equal(await currentRevision(ctx.db), before + 1, 'the others made one revision')
  t.equal(await auditCount(ta, 'grant'), 2)
})

t.test('the audit chain verifies after a concurrent burst', async (t) => {
  const ta = await buildTestApp(t)
  const clerk = await register(ta, { email: 'clerk@example.com', sub_role_code: 'clerk' })
  const acts = ['read', 'refund', 'cancel']
  const burst = [
    ...Array.from({ length: 40 }, (_, i) => roleCommand(ta, i % 3 === 2 ? 'revoke' : 'grant', `burst_${i % 7}`, { obj: 'orders', act: acts[i % 3], domain: 'global' })),
    ...acts.map((act, i) => userCommand(ta, i % 2 === 0 ? 'grant' : 'deny', clerk, { obj: 'orders', act, domain: 'global' })),
  ]
  const replies = await Promise.all(burst)
  t.same(replies.filter((r) => r.statusCode !== 200).map((r) => r.body), [], 'every write answered 200')
  const changed = replies.filter((r) => (r.json().data as { changed: boolean }).changed).length
  const audited = Number((await ta.service.db.query<{ n: string }>("SELECT count(*)::text AS n FROM permission_audit WHERE action IN ('grant', 'deny', 'revoke')")).rows[0]?.n)
  t.equal(audited, changed, 'one audit row per write that changed something')
  const verified = await verifyAudit(ta.service.db)
  t.equal(verified.problem, null, 'the chain is whole')
  const res = await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log/verification?full=true' })
  t.match(res.json(), { data: { valid: true } }, 'and so says the route')
})

t.test('the database out of reach mid-transaction: every write of it fails, nothing of it is written', async (t) => {
  const ta = await buildTestApp(t)
  const ctx = ta.service
  const writes = ctx.writes
  const gate = await holdQueue(t, ta)
  const before = await currentRevision(ctx.db)
  const first = roleCommand(ta, 'grant', 'lost_a', { obj: 'reports', act: 'read', domain: 'global' })
  await queued(writes, 1)
  const fault = writes.run(
    async (tx) => {
      // On PostgreSQL the connection really goes; PGlite has one connection in this process, so the fault is raised as its driver would.
      if (backend === 'postgres') await tx.query('SELECT pg_terminate_backend(pg_backend_pid())')
      else throw new StorageUnavailableError(new Error('Connection terminated'))
      return nothing
    },
    { shared: true },
  )
  const last = roleCommand(ta, 'grant', 'lost_b', { obj: 'reports', act: 'read', domain: 'global' })
  await queued(writes, 3)
  gate.open()
  const [a, f, b] = await Promise.all([first, fault.then(() => null, (e: unknown) => e), last])
  t.type(f, StorageUnavailableError, 'the faulty write reports the database out of reach')
  for (const reply of [a, b]) t.match({ status: reply.statusCode, code: (reply.json() as { response_code?: string }).response_code }, { status: 503, code: '901' }, 'each grant of the transaction answers 503')
  t.equal(await currentRevision(ctx.db), before, 'no revision')
  t.equal(await stored(ta, roleRule('lost_a')), false, 'no row of the transaction')
  t.equal(await stored(ta, roleRule('lost_b')), false)
  t.equal(await auditCount(ta, 'grant'), 0, 'no audit row')
  t.equal(ctx.engine.policy.hasPolicy(roleRule('lost_a')), false, 'nothing in memory')
  const after = await roleCommand(ta, 'grant', 'lost_a', { obj: 'reports', act: 'read', domain: 'global' })
  t.equal(after.statusCode, 200, 'the next write goes through')
})

/** The service's store, with the COMMIT of its `faulty`th transaction answered by a dropped connection: after it landed, or instead of it. */
function unansweredCommit(db: Database, faulty: number, landed: boolean): Database {
  let count = 0
  return Object.assign(Object.create(db) as Database, {
    async transaction<T>(work: (tx: Queryable, opened: Row[]) => Promise<T>, options?: TransactionOptions): Promise<T> {
      if (++count !== faulty) return db.transaction(work, options)
      const lost = new Error('rolled back: the COMMIT never reached the server')
      try {
        await db.transaction(async (tx, opened) => {
          await work(tx, opened)
          if (!landed) throw lost
        }, options)
      } catch (error) {
        if (error !== lost) throw error
      }
      throw new StorageUnavailableError(new Error('Connection terminated'), Date.now())
    },
  })
}

for (const landed of [true, false]) {
  t.test(`a shared transaction whose COMMIT went unanswered and ${landed ? 'landed' : 'did not land'}: every write of it is settled alike`, async (t) => {
    const ta = await buildTestApp(t)
    const ctx = ta.service
    const writes = new WriteQueue(unansweredCommit(ctx.db, 2, landed), ctx.replica, 1000)
    const caller = { account: ta.root, ip: null }
    const plan = (role: string) => planRoleChange(ctx, caller, role, { obj: 'reports', act: 'read', domain: 'global' }, 'grant')
    t.match(await runPlanned({ ...ctx, writes }, await plan('settled_first'), false), { changed: true }, 'the first transaction committed')
    const roles = ['settled_0', 'settled_1', 'settled_2']
    const planned = await Promise.all(roles.map(plan))
    const before = await currentRevision(ctx.db)
    // Queued in one turn of the event loop: they share the second transaction, the faulty one.
    const shared = await Promise.allSettled(planned.map((p) => runPlanned({ ...ctx, writes }, p, false)))
    if (landed) {
      t.same(shared.map((o) => (o.status === 'fulfilled' ? o.value : null)), shared.map(() => ({ changed: true, revision: before + 1 })), 'each answers its own outcome at the shared revision')
      t.ok(roles.every((role) => ctx.engine.policy.hasPolicy(roleRule(role)) === true), 'memory holds them all')
    } else {
      t.ok(shared.every((o) => o.status === 'rejected' && o.reason instanceof StorageUnavailableError), 'each answers the database out of reach')
      t.equal(await currentRevision(ctx.db), before, 'no revision')
      t.same(roles.filter((role) => ctx.engine.policy.hasPolicy(roleRule(role)) === true), [], 'memory holds none of them')
    }
  })
}

/** The service's store, counting the statements its transactions send after their opening (BEGIN and the revision lock, one message on PostgreSQL). */
function countingStatements(db: Database): { db: Database; counts: number[] } {
  const counts: number[] = []
  const counted = (tx: Queryable, i: number): Queryable => ({
    query: (text, params) => ((counts[i] = (counts[i] ?? 0) + 1), tx.query(text, params)),
    queryArrays: (text, params) => ((counts[i] = (counts[i] ?? 0) + 1), tx.queryArrays(text, params)),
    exec: (script) => ((counts[i] = (counts[i] ?? 0) + 1), tx.exec(script)),
  })
  const wrapped = Object.assign(Object.create(db) as Database, {
    transaction<T>(work: (tx: Queryable, opened: Row[]) => Promise<T>, options?: TransactionOptions): Promise<T> {
      const i = counts.push(0) - 1
      return db.transaction((tx, opened) => work(counted(tx, i), opened), options)
    },
  })
  return { db: wrapped, counts }
}

t.test('a shared transaction of role grants sends the same few statements whatever their number', async (t) => {
  const ta = await buildTestApp(t)
  const ctx = ta.service
  const { db, counts } = countingStatements(ctx.db)
  const writes = new WriteQueue(db, ctx.replica)
  const caller = { account: ta.root, ip: null }
  const plan = (role: string) => planRoleChange(ctx, caller, role, { obj: 'reports', act: 'read', domain: 'global' }, 'grant')
  t.match(await runPlanned({ ...ctx, writes }, await plan('counted_alone'), false), { changed: true })
  const planned = await Promise.all(Array.from({ length: 20 }, (_, i) => plan(`counted_${i}`)))
  // Queued in one turn of the event loop: they share the second transaction.
  const answers = await Promise.all(planned.map((p) => runPlanned({ ...ctx, writes }, p, false)))
  t.ok(answers.every((a) => a.changed && a.revision === answers[0]?.revision), 'the twenty shared one revision')
  // Their rows and the audit ids in one statement, then one statement for the audit rows, the revision, the feed and the stream's items.
  t.same(counts, [2, 2], 'two statements after the opening, for one grant and for twenty')
  t.equal((await verifyAudit(ctx.db)).problem, null, 'the chain is whole')
  t.equal(await auditCount(ta, 'grant'), 21, 'each its own audit row')
})
