import t from 'tap'
import { verifyAudit, describeProblem } from '../../src/commands/verifyAudit.js'
import type { Database } from '../../src/storage/db.js'
import { buildTestApp, onboard, register } from '../helper.js'

/** Runs `sql` with the append-only triggers off, as a superuser could. */
async function asSuperuser(db: Database, sql: string, params: unknown[] = []): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('ALTER TABLE permission_audit DISABLE TRIGGER USER')
    await tx.query(sql, params)
    await tx.query('ALTER TABLE permission_audit ENABLE TRIGGER USER')
  })
}

t.test('audit rows: append-only, hash-chained, verified', async (t) => {
  const ta = await buildTestApp(t)
  const db = ta.service.db
  const m1 = await onboard(ta, 'm1')
  await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(m1))
  for (const act of ['read', 'refund', 'cancel']) {
    await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      body: { command: 'grant-role-permission', data: { obj: 'orders', act, domain: 'm1' } },
    })
  }
  const ids = (await db.query<{ id: string }>('SELECT id::text AS id FROM permission_audit ORDER BY permission_audit.id')).rows.map((r) => r.id)
  t.ok(ids.length > 10)
  const whole = await verifyAudit(db)
  t.equal(whole.problem, null, 'a fresh chain verifies')
  t.equal(whole.rows, ids.length)

  t.test('UPDATE, DELETE and TRUNCATE are refused', async (t) => {
    await t.rejects(db.query("UPDATE permission_audit SET actor_id = 'mallory'"), /append-only/)
    await t.rejects(db.query('DELETE FROM permission_audit'), /append-only/)
    await t.rejects(db.query('TRUNCATE permission_audit'), /append-only/)
    t.equal((await db.query('SELECT 1 FROM permission_audit')).rows.length, ids.length)
  })

  const victim = ids[5] as string
  const original = (await db.query<Record<string, unknown>>('SELECT * FROM permission_audit WHERE id = $1::bigint', [victim])).rows[0] as Record<string, unknown>

  t.test('an edited row is named, and restoring it verifies again', async (t) => {
    await asSuperuser(db, "UPDATE permission_audit SET actor_id = 'mallory' WHERE id = $1::bigint", [victim])
    const edited = await verifyAudit(db)
    t.same(edited.problem, { kind: 'edited', id: victim })
    t.match(describeProblem(edited.problem ?? { kind: 'edited', id: '' }), new RegExp(`row ${victim} was edited`))
    await asSuperuser(db, 'UPDATE permission_audit SET actor_id = $2 WHERE id = $1::bigint', [victim, original.actor_id])
    t.equal((await verifyAudit(db)).problem, null)
  })

  t.test('a deleted row breaks the chain at the next one', async (t) => {
    await asSuperuser(db, 'DELETE FROM permission_audit WHERE id = $1::bigint', [victim])
    const deleted = await verifyAudit(db)
    t.same(deleted.problem, { kind: 'broken', id: ids[6] })
    const columns = Object.keys(original)
    await asSuperuser(
      db,
      `INSERT INTO permission_audit (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
      columns.map((c) => original[c]),
    )
    t.equal((await verifyAudit(db)).problem, null, 'restored to its exact content')
  })

  t.test('swapped rows are found', async (t) => {
    const a = ids[3] as string
    const b = ids[4] as string
    await asSuperuser(db, 'UPDATE permission_audit SET id = -1 WHERE id = $1::bigint', [a])
    await asSuperuser(db, 'UPDATE permission_audit SET id = $1::bigint WHERE id = $2::bigint', [a, b])
    await asSuperuser(db, 'UPDATE permission_audit SET id = $1::bigint WHERE id = -1', [b])
    const swapped = await verifyAudit(db)
    t.same(swapped.problem, { kind: 'broken', id: a })
    await asSuperuser(db, 'UPDATE permission_audit SET id = -1 WHERE id = $1::bigint', [a])
    await asSuperuser(db, 'UPDATE permission_audit SET id = $1::bigint WHERE id = $2::bigint', [a, b])
    await asSuperuser(db, 'UPDATE permission_audit SET id = $1::bigint WHERE id = -1', [b])
    t.equal((await verifyAudit(db)).problem, null)
  })

  t.test('rows deleted from the end are found through the chain head', async (t) => {
    const last = ids[ids.length - 1] as string
    const row = (await db.query<Record<string, unknown>>('SELECT * FROM permission_audit WHERE id = $1::bigint', [last])).rows[0] as Record<string, unknown>
    await asSuperuser(db, 'DELETE FROM permission_audit WHERE id = $1::bigint', [last])
    const truncated = await verifyAudit(db)
    t.same(truncated.problem, { kind: 'tail_missing', id: ids[ids.length - 2] })
    const columns = Object.keys(row)
    await asSuperuser(
      db,
      `INSERT INTO permission_audit (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
      columns.map((c) => row[c]),
    )
    t.equal((await verifyAudit(db)).problem, null)
  })

  t.test('concurrent writers still form one chain', async (t) => {
    const clerks = await Promise.all(
      ['a', 'b', 'c', 'd', 'e', 'f'].map((n) => register(ta, { email: `${n}@m1.example`, sub_role_code: `role_${n}` }, ta.tokenFor(m1))),
    )
    await Promise.all(
      clerks.map((c) =>
        ta.call({
          method: 'POST',
          url: `/v2/admin/permissions/users/${c.id}/deny`,
          body: { command: 'deny-user-permission', data: { obj: 'orders', act: 'read' } },
        }),
      ),
    )
    const result = await verifyAudit(db)
    t.equal(result.problem, null)
    t.ok(result.rows >= ids.length + 12)
  })
})

t.test('the audit row records the real client address', async (t) => {
  const plain = await buildTestApp(t)
  const behindProxy = await buildTestApp(t, { env: { TRUST_PROXY: '10.0.0.1' } })
  const grant = async (ta: typeof plain, act: string, remoteAddress: string, forwarded?: string) => {
    const res = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      remoteAddress,
      ...(forwarded !== undefined ? { headers: { 'x-forwarded-for': forwarded } } : {}),
      body: { command: 'grant-role-permission', data: { obj: 'orders', act } },
    })
    t.equal(res.statusCode, 200)
    const { rows } = await ta.service.db.query<{ ip: string }>(
      "SELECT ip FROM permission_audit WHERE action = 'grant' AND act = $1",
      [act],
    )
    return rows[0]?.ip
  }
  t.equal(await grant(plain, 'read', '10.0.0.9', '6.6.6.6'), '10.0.0.9', 'a forged X-Forwarded-For from an untrusted peer is ignored')
  t.equal(await grant(plain, 'refund', '::ffff:192.0.2.7'), '192.0.2.7', 'IPv4-mapped IPv6 is normalised')
  t.equal(await grant(plain, 'cancel', '2001:DB8::1'), '2001:db8::1')
  t.equal(await grant(behindProxy, 'read', '10.0.0.1', '203.0.113.5'), '203.0.113.5', 'a trusted proxy forwards the client address')
  t.equal(await grant(behindProxy, 'refund', '10.0.0.2', '203.0.113.5'), '10.0.0.2', 'an untrusted peer is not believed')
})
