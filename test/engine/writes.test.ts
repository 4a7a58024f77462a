import t from 'tap'
import { grantRolePermission, revokeRolePermission } from '../../src/commands/grantRolePermission.js'
import { syncCatalog } from '../../src/commands/syncCatalog.js'
import { revokeUserPermission, setUserPermission } from '../../src/commands/userOverrides.js'
import { declaredCatalog } from '../../src/domain/permissions.js'
import { backend, buildTestApp, buildTestService, onboard, register, secondConnection } from '../helper.js'

t.test('a write and its audit row commit together, or neither does', async (t) => {
  const ta = await buildTestApp(t)
  const { service } = ta
  const db = service.db
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
  const root = { account: ta.root, ip: '127.0.0.1' }
  const state = async () => ({
    rules: (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')).rows[0]?.n,
    overrides: (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_overrides')).rows[0]?.n,
    audit: (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_audit')).rows[0]?.n,
    revision: (await db.query<{ r: string }>('SELECT revision::text AS r FROM store_revision')).rows[0]?.r,
  })
  const refuse = async (action: string, work: () => Promise<unknown>) => {
    await db.query(`ALTER TABLE permission_audit ADD CONSTRAINT refuse_${action} CHECK (action <> '${action}')`)
    const before = await state()
    await t.rejects(work(), `${action} fails when its audit row cannot be written`)
    t.same(await state(), before, `${action}: database unchanged`)
    await db.query(`ALTER TABLE permission_audit DROP CONSTRAINT refuse_${action}`)
  }

  await refuse('grant', () => grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' }))
  t.equal(service.engine.decide(clerk, 'm1', 'orders', 'read'), false, 'grant: memory unchanged')
  await refuse('deny', () => setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'refund' }, 'deny'))
  t.same(service.engine.rulesOf(clerk.id, ['m1']), [], 'deny: memory unchanged')

  const granted = await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' })
  t.equal(granted.changed, true)
  await setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'read' }, 'allow')
  await refuse('revoke', () => revokeUserPermission(service, root, clerk.id, { obj: 'orders', act: 'read' }))
  t.same(service.engine.rulesOf(clerk.id, ['m1']).map((r) => r.effect), ['allow'], 'revoke: memory unchanged')
  await refuse('revoke', () => revokeRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' }))
  t.equal(service.engine.decide(clerk, 'm1', 'orders', 'read'), true)

  t.test('repeats change nothing and write no audit row', async (t) => {
    const before = await state()
    const again = await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' })
    t.same({ changed: again.changed, revision: String(again.revision) }, { changed: false, revision: before.revision })
    const allowAgain = await setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'read' }, 'allow')
    t.equal(allowAgain.changed, false)
    const revokeMissing = await revokeRolePermission(service, root, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    t.equal(revokeMissing.changed, false)
    t.same(await state(), before)
  })

  t.test('a deny replaces an allow override', async (t) => {
    const denied = await setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'read' }, 'deny')
    t.equal(denied.changed, true)
    const { rows } = await db.query<{ effect: string }>('SELECT effect FROM permission_overrides WHERE user_id = $1', [clerk.id])
    t.same(rows, [{ effect: 'deny' }])
    t.same(service.engine.rulesOf(clerk.id, ['m1']).map((r) => r.effect), ['deny'])
    t.equal(service.engine.decide(clerk, 'm1', 'orders', 'read'), false)
  })

  t.test('revisions strictly increase and match the store', async (t) => {
    const revisions: number[] = []
    for (const act of ['refund', 'cancel']) {
      revisions.push((await grantRolePermission(service, root, 'clerk', { obj: 'orders', act, domain: 'm1' })).revision)
    }
    revisions.push((await revokeRolePermission(service, root, 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })).revision)
    t.ok(revisions.every((r, i) => i === 0 || r > (revisions[i - 1] as number)), JSON.stringify(revisions))
    t.equal(String(revisions.at(-1)), (await state()).revision)
  })

  t.test('when memory cannot follow a commit, the engine reloads', async (t) => {
    const engine = service.engine
    const original = engine.addRule.bind(engine)
    let failed = 0
    engine.addRule = async () => {
      failed++
      throw new Error('simulated failure in memory')
    }
    try {
      await grantRolePermission(service, root, 'clerk', { obj: 'payouts', act: 'read', domain: 'm1' })
    } finally {
      engine.addRule = original
    }
    t.equal(failed, 1)
    t.equal(engine.decide(clerk, 'm1', 'payouts', 'read'), true, 'the reload brought the committed grant')
  })
})

t.test('twenty identical grants at once make one row and one audit entry', async (t) => {
  const ta = await buildTestApp(t)
  const pair = { obj: 'customers', act: 'export' }
  const results = await Promise.all(
    Array.from({ length: 20 }, () =>
      ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: pair } }),
    ),
  )
  t.ok(results.every((r) => r.statusCode === 200))
  t.equal(results.filter((r) => r.json().data.changed === true).length, 1, 'one of them changed something')
  const rows = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM casbin_rule WHERE ptype = 'p' AND v0 = 'clerk'")
  t.equal(rows.rows[0]?.n, 1)
  const audit = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM permission_audit WHERE action = 'grant' AND target_id = 'clerk'")
  t.equal(audit.rows[0]?.n, 1)

  if (backend === 'postgres') {
    t.test('across two replicas on one database', async (t) => {
      const other = await buildTestService(t, { db: secondConnection(t, ta.service.db as { schema?: string }) })
      const root = { account: ta.root, ip: null }
      const twin = { obj: 'customers', act: 'read', domain: 'global' }
      const outcomes = await Promise.all([
        ...Array.from({ length: 10 }, () => grantRolePermission(ta.service, root, 'clerk', twin)),
        ...Array.from({ length: 10 }, () => grantRolePermission(other, root, 'clerk', twin)),
      ])
      t.equal(outcomes.filter((o) => o.changed).length, 1)
      const count = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM permission_audit WHERE action = 'grant' AND act = 'read' AND target_id = 'clerk'")
      t.equal(count.rows[0]?.n, 1)
      // The replica whose write lost the race learns of the row on its next reload.
      await other.reload()
      t.same(other.engine.rulesOf('clerk', ['global']).filter((r) => r.act === 'read').length, 1)
    })
  }
})

t.test('catalog sync records each lifecycle event once', async (t) => {
  const service = await buildTestService(t)
  const events = async (action: string) =>
    (await service.db.query<{ target_id: string }>('SELECT target_id FROM permission_audit WHERE action = $1 ORDER BY target_id', [action])).rows.map((r) => r.target_id)
  const declared = declaredCatalog()
  t.equal((await events('catalog_added')).length, declared.length)
  t.equal((await syncCatalog(service, declared)).events, 0, 'a second sync records nothing')
  const without = declared.filter((p) => !(p.obj === 'orders' && p.act === 'refund'))
  t.equal((await syncCatalog(service, without)).events, 1)
  t.same(await events('catalog_deactivated'), ['orders:refund'])
  t.equal(service.engine.isActive('orders', 'refund'), false)
  const staff = { id: '00000000-0000-4000-8000-000000000001', principal_type: 'system_owner' as const, merchant_id: null, sub_role_code: 'clerk' }
  await service.engine.addRule('g', [staff.id, 'clerk', 'global'])
  await service.engine.addRule('p', ['clerk', 'global', 'orders', 'refund', 'allow'])
  t.equal(service.engine.decide(staff, 'global', 'orders', 'refund'), false, 'an inactive pair is never effective')
  t.equal((await syncCatalog(service, declared)).events, 1)
  t.same(await events('catalog_reactivated'), ['orders:refund'])
  t.equal(service.engine.decide(staff, 'global', 'orders', 'refund'), true)
  const rows = await service.db.query<{ is_active: boolean }>("SELECT is_active FROM permission_catalog WHERE obj = 'orders' AND act = 'refund'")
  t.same(rows.rows, [{ is_active: true }])
})
