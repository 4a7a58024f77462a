import t from 'tap'
import { appendChainedAuditRows, measureStall } from '../../bench/auditChain.js'
import { AUDIT_VERIFY_PAGE_ROWS, SharedAuditVerifications, verifyAudit } from '../../src/commands/verifyAudit.js'
import { moveAuditCheckpoint, readAuditCheckpoint } from '../../src/storage/audit.js'
import type { Database, Queryable } from '../../src/storage/db.js'
import { backend, buildTestApp, freshDatabase, register, secondConnection } from '../helper.js'
import { migrate } from '../../src/storage/migrate.js'

/** Runs `sql` with the append-only triggers off, as a superuser could. */
async function asSuperuser(db: Database, sql: string, params: unknown[] = []): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('ALTER TABLE permission_audit DISABLE TRIGGER USER')
    await tx.query(sql, params)
    await tx.query('ALTER TABLE permission_audit ENABLE TRIGGER USER')
  })
}

async function chainEnd(q: Queryable): Promise<{ id: string; hash: string; rows: number }> {
  const { rows } = await q.query<{ id: string; hash: string; rows: number }>(
    'SELECT (SELECT max(id) FROM permission_audit)::text AS id, audit_head AS hash, (SELECT count(*)::int FROM permission_audit) AS rows FROM store_revision',
  )
  return rows[0] as { id: string; hash: string; rows: number }
}

const ROWS = 20_000

t.test('a large chain is verified in bounded pages that leave the event loop free', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await appendChainedAuditRows(db, ROWS)
  const { result, stall, took, turns } = await measureStall(() => verifyAudit(db, { full: true }))
  t.equal(result.problem, null, 'the bulk-made chain verifies')
  t.equal(result.read, ROWS)
  t.ok(result.largestSlice <= AUDIT_VERIFY_PAGE_ROWS, `at most ${AUDIT_VERIFY_PAGE_ROWS} rows read and hashed between turns (${result.largestSlice})`)
  t.ok(turns >= ROWS / AUDIT_VERIFY_PAGE_ROWS / 2, `the timer ran between the pages (${turns} turns)`)
  // Relative to the walk itself, so that a loaded machine slows both: one page of forty, not the whole walk.
  t.ok(stall < took / 5, `the longest stall (${stall.toFixed(1)} ms) is a small part of the walk (${took.toFixed(1)} ms)`)
})

t.test('the checkpoint: a repeat verification reads only new rows; a full one still finds an edit behind it', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await appendChainedAuditRows(db, 1200)
  const first = await verifyAudit(db, { full: false })
  t.match(first, { problem: null, read: 1200, rows: 1200, full: false })
  const end = await chainEnd(db)
  t.same(await readAuditCheckpoint(db), { id: end.id, hash: end.hash, rows: 1200 }, 'the checkpoint is the last row walked')

  t.match(await verifyAudit(db, { full: false }), { problem: null, read: 0, rows: 1200 }, 'nothing new: nothing read')
  await appendChainedAuditRows(db, 37)
  t.match(await verifyAudit(db, { full: false }), { problem: null, read: 37, rows: 1237 }, 'only the rows written since')

  const victim = String(Number(end.id) - 600)
  await asSuperuser(db, "UPDATE permission_audit SET actor_id = 'mallory' WHERE id = $1::bigint", [victim])
  await appendChainedAuditRows(db, 3)
  t.match(await verifyAudit(db, { full: false }), { problem: null, read: 3 }, 'a repeat verification trusts what it verified before')
  const full = await verifyAudit(db, { full: true })
  t.same(full.problem, { kind: 'edited', id: victim }, 'the full verification finds the edit behind the checkpoint')
  t.same(await readAuditCheckpoint(db), { id: '0', hash: '0'.repeat(64), rows: 0 }, 'and clears the checkpoint')
  t.same((await verifyAudit(db, { full: false })).problem, { kind: 'edited', id: victim }, 'so the next repeat verification finds it too')

  await asSuperuser(db, "UPDATE permission_audit SET actor_id = 'bench-actor' WHERE id = $1::bigint", [victim])
  t.match(await verifyAudit(db, { full: false }), { problem: null, read: 1240, rows: 1240 }, 'restored: whole again from the start')
})

t.test('rows deleted behind or at the checkpoint', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await appendChainedAuditRows(db, 30)
  t.equal((await verifyAudit(db, { full: false })).problem, null)
  const end = await chainEnd(db)
  await asSuperuser(db, 'DELETE FROM permission_audit WHERE id > $1::bigint - 5', [end.id])
  // The head is rewound to the last row left, and new rows chain from it, with ids at or below the checkpoint's.
  await db.query('UPDATE store_revision SET audit_head = (SELECT row_hash FROM permission_audit ORDER BY id DESC LIMIT 1)')
  await appendChainedAuditRows(db, 2)
  t.same((await verifyAudit(db, { full: false })).problem, { kind: 'tail_missing', id: end.id }, 'a repeat verification sees the head no longer where it left it')
  await appendChainedAuditRows(db, 10)
  t.same((await verifyAudit(db, { full: false })).problem?.kind, 'broken', 'rows after the checkpoint that do not follow it are found')
})

t.test('the checkpoint moves by compare-and-set', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await appendChainedAuditRows(db, 10)
  const start = await readAuditCheckpoint(db)
  const end = await chainEnd(db)
  t.ok(await moveAuditCheckpoint(db, start, { id: end.id, hash: end.hash, rows: 10 }), 'moves from what it read')
  t.notOk(await moveAuditCheckpoint(db, start, { id: '5', hash: 'stale', rows: 5 }), 'a verification that started from an older checkpoint does not move it')
  t.same(await readAuditCheckpoint(db), { id: end.id, hash: end.hash, rows: 10 })

  await appendChainedAuditRows(db, 2 * AUDIT_VERIFY_PAGE_ROWS + 7)
  const other = backend === 'postgres' ? secondConnection(t, db) : db
  const both = await Promise.all([
    verifyAudit(db, { full: false }),
    verifyAudit(other, { full: false }),
    verifyAudit(other, { full: true }),
    verifyAudit(db, { full: false, pageRows: 3 }),
  ])
  t.ok(both.every((r) => r.problem === null), 'concurrent verifications all find the chain whole')
  const after = await chainEnd(db)
  t.same(await readAuditCheckpoint(db), { id: after.id, hash: after.hash, rows: after.rows }, 'the checkpoint is a consistent point: the last row, its hash, the count')
  t.match(await verifyAudit(db, { full: false }), { problem: null, read: 0, rows: after.rows })
})

t.test('concurrent verifications of one kind join the running walk instead of starting another', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await appendChainedAuditRows(db, 2_000)
  const shared = new SharedAuditVerifications(db)
  const first = shared.run(true)
  t.equal(shared.run(true), first, 'a second full verification joins the first')
  const fromCheckpoint = shared.run(false)
  t.not(fromCheckpoint, first, 'one from the checkpoint is a walk of its own')
  const [a, b] = await Promise.all([first, fromCheckpoint])
  t.equal(a.problem, null)
  t.equal(b.problem, null)
  const again = shared.run(true)
  t.not(again, first, 'once it has ended, the next verification walks again')
  t.equal((await again).problem, null)
})

t.test('GET verification: from the checkpoint; full=true for root callers only', async (t) => {
  const ta = await buildTestApp(t)
  const url = '/v2/admin/permissions/audit-log/verification'
  const count = async () => (await ta.service.db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_audit')).rows[0]?.n
  const n = await count()
  t.match((await ta.call({ method: 'GET', url })).json().data, { valid: true, rows: n, read: n, full: false })
  const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'auditor' })
  await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/auditor/grant',
    body: { command: 'grant-role-permission', data: { obj: 'permission', act: 'read' } },
  })
  const m = await count()
  const repeat = await ta.call({ method: 'GET', url, token: ta.tokenFor(staff) })
  t.equal(repeat.statusCode, 200, 'staff holding permission:read')
  t.match(repeat.json().data, { valid: true, rows: m, read: (m ?? 0) - (n ?? 0), full: false }, 'reads only the rows written since')
  const refused = await ta.call({ method: 'GET', url: `${url}?full=true`, token: ta.tokenFor(staff) })
  t.equal(refused.statusCode, 403, 'a full walk needs a root sub-role')
  t.match(refused.json(), { response_code: '300' })
  t.match((await ta.call({ method: 'GET', url: `${url}?full=true` })).json().data, { valid: true, rows: m, read: m, full: true }, 'root: every row')
})
