/**
 * The rules every write follows: its rows, its
 * audit row and the revision bump commit together or not at all; memory
 * changes only after the commit and is reloaded when it cannot follow;
 * repeats and concurrent duplicates change nothing and are audited once.
 * Runs on PGlite and on PostgreSQL; the replica cases need PostgreSQL.
 */
import t from 'tap'
import type { Caller } from '../../src/commands/context.js'
import { grantRolePermission, revokeRolePermission } from '../../src/commands/changeRolePermission.js'
import { syncCatalog } from '../../src/commands/syncCatalog.js'
import { revokeUserPermission, setUserPermission } from '../../src/commands/userOverrides.js'
import type { Service } from '../../src/compose.js'
import type { Account } from '../../src/domain/principals.js'
import { declaredCatalog, type PermissionDeclaration } from '../../src/domain/permissions.js'
import type { Queryable, Row } from '../../src/storage/db.js'
import { backend, buildTestApp, buildTestService, freshDatabase, onboard, register, secondConnection, type TestApp } from '../helper.js'
import { INTERNALS } from '../support/envelope.js'

interface Store {
  rules: Row[]
  overrides: Row[]
  audit: Row[]
  subRoles: Row[]
  revision: Row[]
}

/** Everything a permission write may touch, to prove that a failed one touched nothing. */
async function store(q: Queryable): Promise<Store> {
  const rows = async (sql: string) => (await q.query(sql)).rows
  return {
    rules: await rows('SELECT id::text AS id, ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule ORDER BY casbin_rule.id'),
    overrides: await rows('SELECT user_id::text AS user_id, domain, obj, act, effect, set_by FROM permission_overrides ORDER BY permission_overrides.user_id, domain, obj, act'),
    audit: await rows('SELECT id::text AS id, action, target_id, obj, act, domain FROM permission_audit ORDER BY permission_audit.id'),
    subRoles: await rows('SELECT code, is_root FROM sub_roles ORDER BY code'),
    revision: await rows('SELECT revision::text AS revision, audit_head FROM store_revision'),
  }
}

async function revisionOf(q: Queryable): Promise<number> {
  return Number((await q.query<{ r: string }>('SELECT revision::text AS r FROM store_revision')).rows[0]?.r)
}

async function count(q: Queryable, sql: string, params: unknown[] = []): Promise<number> {
  return Number((await q.query<{ n: string }>(sql, params)).rows[0]?.n)
}

const auditCount = (q: Queryable, action: string, targetId: string, obj: string, act: string) =>
  count(q, 'SELECT count(*) AS n FROM permission_audit WHERE action = $1 AND target_id = $2 AND obj = $3 AND act = $4', [action, targetId, obj, act])

const roleRuleCount = (q: Queryable, role: string, domain: string, obj: string, act: string) =>
  count(q, "SELECT count(*) AS n FROM casbin_rule WHERE ptype = 'p' AND v0 = $1 AND v1 = $2 AND v2 = $3 AND v3 = $4", [role, domain, obj, act])

/** What the in-memory engine holds and answers about the clerk: its role's rules, its own rules, some decisions. */
function memory(service: Service, clerk: Account) {
  const pairs = [
    ['orders', 'read'],
    ['orders', 'refund'],
    ['orders', 'cancel'],
    ['payouts', 'read'],
  ] as const
  return {
    role: service.engine.rulesOf('clerk', ['m1', 'global']),
    user: service.engine.rulesOf(clerk.id, ['m1', 'global']),
    decide: pairs.map(([obj, act]) => service.engine.decide(clerk, 'm1', obj, act)),
    enforce: pairs.map(([obj, act]) => service.engine.enforce(clerk.id, 'm1', obj, act)),
  }
}

/** A CHECK on the audit table that refuses one action: the write's audit insert fails, inside its transaction. */
async function refuseAudit(q: Queryable, action: string): Promise<() => Promise<void>> {
  const name = `refuse_${action}`
  // NOT VALID: earlier rows with that action stay; only new ones are checked.
  await q.query(`ALTER TABLE permission_audit ADD CONSTRAINT ${name} CHECK (action <> '${action}') NOT VALID`)
  return async () => {
    await q.query(`ALTER TABLE permission_audit DROP CONSTRAINT ${name}`)
  }
}

async function setting(ta: TestApp): Promise<{ clerk: Account; root: Caller }> {
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
  return { clerk, root: { account: ta.root, ip: '127.0.0.1' } }
}

t.test('a write, its audit row and the revision bump commit together or not at all', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const { service } = ta
  const { clerk, root } = await setting(ta)

  t.test('grant: a failed audit insert leaves database and memory as they were', async (t) => {
    const allow = await refuseAudit(db, 'grant')
    const before = await store(db)
    const held = memory(service, clerk)
    t.same(held.decide, [false, false, false, false], 'the clerk holds nothing yet')

    await t.rejects(grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' }), { code: '23514' })
    await t.rejects(grantRolePermission(service, root, 'auditor', { obj: 'orders', act: 'read', domain: 'm1' }), { code: '23514' }, 'to a sub-role not created yet')
    const res = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } },
    })
    t.equal(res.statusCode, 500, 'over HTTP: a 500')
    t.notMatch(res.body, INTERNALS, 'whose text shows no internals')
    t.notMatch(res.body, /refuse_grant|23514/)

    t.same(await store(db), before, 'no rule, no audit row, no new sub-role, the same revision and audit head')
    t.same(memory(service, clerk), held, 'memory unchanged')
    t.equal(service.engine.enforce(clerk.id, 'm1', 'orders', 'read'), false)

    await allow()
    const granted = await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' })
    t.equal(granted.changed, true, 'without the refusal the same grant goes through')
    t.equal(granted.revision, Number(before.revision[0]?.revision) + 1)
    t.equal(service.engine.decide(clerk, 'm1', 'orders', 'read'), true)
  })

  t.test('deny: a failed audit insert leaves database and memory as they were', async (t) => {
    await setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'refund' }, 'allow')
    const allow = await refuseAudit(db, 'deny')
    const before = await store(db)
    const held = memory(service, clerk)
    t.same(held.decide, [true, true, false, false])

    // A new deny, and a deny that would replace the allow (two memory changes).
    await t.rejects(setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'read' }, 'deny'), { code: '23514' })
    await t.rejects(setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'refund' }, 'deny'), { code: '23514' })

    t.same(await store(db), before, 'the allow override is still stored, nothing else changed')
    t.same(memory(service, clerk), held, 'memory still holds the allow and no deny')
    t.same(
      service.engine.rulesOf(clerk.id, ['m1']).map((r) => [r.obj, r.act, r.effect]),
      [['orders', 'refund', 'allow']],
    )

    await allow()
    t.equal((await setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'refund' }, 'deny')).changed, true)
    t.equal(service.engine.decide(clerk, 'm1', 'orders', 'refund'), false, 'without the refusal the deny applies')
  })

  t.test('revoke: a failed audit insert leaves database and memory as they were', async (t) => {
    await setUserPermission(service, root, clerk.id, { obj: 'orders', act: 'cancel' }, 'allow')
    const allow = await refuseAudit(db, 'revoke')
    const before = await store(db)
    const held = memory(service, clerk)
    t.same(held.decide, [true, false, true, false])

    await t.rejects(revokeUserPermission(service, root, clerk.id, { obj: 'orders', act: 'cancel' }), { code: '23514' })
    await t.rejects(revokeUserPermission(service, root, clerk.id, { obj: 'orders', act: 'refund' }), { code: '23514' })
    await t.rejects(revokeRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'm1' }), { code: '23514' })

    t.same(await store(db), before, 'the overrides and the role rule are still stored')
    t.same(memory(service, clerk), held, 'memory unchanged')

    await allow()
    t.equal((await revokeUserPermission(service, root, clerk.id, { obj: 'orders', act: 'cancel' })).changed, true)
    t.equal(service.engine.decide(clerk, 'm1', 'orders', 'cancel'), false)
  })

  t.test('repeats change nothing and write no second audit row', async (t) => {
    const pair = { obj: 'payouts', act: 'read', domain: 'm1' }
    const first = await grantRolePermission(service, root, 'clerk', pair)
    const afterFirst = await store(db)
    const second = await grantRolePermission(service, root, 'clerk', pair)
    t.same([first.changed, second.changed], [true, false])
    t.equal(second.revision, first.revision, 'the same revision')
    t.same(await store(db), afterFirst, 'no second row, no second audit row, no bump')
    t.equal(await auditCount(db, 'grant', 'clerk', 'payouts', 'read'), 1)

    const denied = await setUserPermission(service, root, clerk.id, { obj: 'payouts', act: 'read' }, 'deny')
    const afterDeny = await store(db)
    const deniedAgain = await setUserPermission(service, root, clerk.id, { obj: 'payouts', act: 'read' }, 'deny')
    t.same([denied.changed, deniedAgain.changed], [true, false])
    t.equal(deniedAgain.revision, denied.revision)
    t.same(await store(db), afterDeny)
    t.equal(await auditCount(db, 'deny', clerk.id, 'payouts', 'read'), 1)

    const revoked = await revokeUserPermission(service, root, clerk.id, { obj: 'payouts', act: 'read' })
    const afterRevoke = await store(db)
    const revokedAgain = await revokeUserPermission(service, root, clerk.id, { obj: 'payouts', act: 'read' })
    t.same([revoked.changed, revokedAgain.changed], [true, false])
    t.equal(revokedAgain.revision, revoked.revision)
    t.same(await store(db), afterRevoke)
    t.equal(await auditCount(db, 'revoke', clerk.id, 'payouts', 'read'), 1)

    const roleRevoked = await revokeRolePermission(service, root, 'clerk', pair)
    const roleRevokedAgain = await revokeRolePermission(service, root, 'clerk', pair)
    t.same([roleRevoked.changed, roleRevokedAgain.changed], [true, false])
    t.equal(roleRevokedAgain.revision, roleRevoked.revision)
    t.equal(await auditCount(db, 'revoke', 'clerk', 'payouts', 'read'), 1)
    t.equal(await revisionOf(db), roleRevoked.revision)
  })

  t.test('revisions strictly increase and end at the store revision', async (t) => {
    const auditBefore = await count(db, 'SELECT count(*) AS n FROM permission_audit')
    const writes = [
      () => grantRolePermission(service, root, 'clerk', { obj: 'products', act: 'read', domain: 'm1' }),
      () => grantRolePermission(service, root, 'clerk', { obj: 'products', act: 'write', domain: 'm1' }),
      () => grantRolePermission(service, root, 'clerk', { obj: 'reports', act: 'read' }),
      () => setUserPermission(service, root, clerk.id, { obj: 'reports', act: 'read' }, 'deny'),
      () => grantRolePermission(service, root, 'viewer', { obj: 'reports', act: 'read', domain: 'm1' }),
      () => revokeRolePermission(service, root, 'clerk', { obj: 'products', act: 'write', domain: 'm1' }),
      () => revokeUserPermission(service, root, clerk.id, { obj: 'reports', act: 'read' }),
    ]
    const revisions: number[] = []
    for (const write of writes) {
      const outcome = await write()
      t.equal(outcome.changed, true)
      revisions.push(outcome.revision)
    }
    t.ok(
      revisions.every((r, i) => i === 0 || r > (revisions[i - 1] ?? Infinity)),
      `strictly increasing: ${revisions.join(', ')}`,
    )
    t.equal(revisions.at(-1), await revisionOf(db), 'the last equals store_revision.revision')
    t.equal(await count(db, 'SELECT count(*) AS n FROM permission_audit'), auditBefore + writes.length, 'one audit row per write')
  })

  t.test('a deny replaces an allow override for the same pair', async (t) => {
    const pair = { obj: 'customers', act: 'read' }
    t.equal((await setUserPermission(service, root, clerk.id, pair, 'allow')).changed, true)
    t.equal(service.engine.decide(clerk, 'm1', 'customers', 'read'), true)
    t.equal((await setUserPermission(service, root, clerk.id, pair, 'deny')).changed, true)
    const { rows } = await db.query('SELECT domain, effect, set_by FROM permission_overrides WHERE user_id = $1 AND obj = $2 AND act = $3', [
      clerk.id,
      'customers',
      'read',
    ])
    t.same(rows, [{ domain: 'm1', effect: 'deny', set_by: ta.root.id }], 'one row, now a deny')
    t.same(
      service.engine.rulesOf(clerk.id, ['m1', 'global']).filter((r) => r.obj === 'customers' && r.act === 'read').map((r) => r.effect),
      ['deny'],
      'memory holds the deny and not the allow',
    )
    t.equal(service.engine.enforce(clerk.id, 'm1', 'customers', 'read'), false)
    t.equal(service.engine.decide(clerk, 'm1', 'customers', 'read'), false)
    const entries = await db.query<{ action: string }>(
      "SELECT action FROM permission_audit WHERE target_id = $1 AND obj = 'customers' AND act = 'read' ORDER BY permission_audit.id",
      [clerk.id],
    )
    t.same(entries.rows.map((r) => r.action), ['grant', 'deny'])

    t.equal((await setUserPermission(service, root, clerk.id, pair, 'allow')).changed, true, 'and an allow replaces the deny')
    t.same(
      service.engine.rulesOf(clerk.id, ['m1']).filter((r) => r.obj === 'customers' && r.act === 'read').map((r) => r.effect),
      ['allow'],
    )
    t.equal(service.engine.decide(clerk, 'm1', 'customers', 'read'), true)
  })

  t.test('when memory cannot follow a commit, the engine reloads from the database', async (t) => {
    const engine = service.engine
    await grantRolePermission(service, root, 'clerk', { obj: 'settings', act: 'manage', domain: 'm1' })
    await setUserPermission(service, root, clerk.id, { obj: 'settings', act: 'manage' }, 'allow')
    t.equal(engine.decide(clerk, 'm1', 'settings', 'manage'), true)

    // The deny replaces the allow: memory removes the allow, then fails to add the deny.
    // Left like that, the role grant would still allow; only a reload brings the deny.
    const addRule = engine.addRule
    let addFailures = 0
    engine.addRule = async (...args) => {
      if (addFailures++ === 0) throw new Error('simulated failure applying a change in memory')
      return addRule.apply(engine, args)
    }
    const denied = await setUserPermission(service, root, clerk.id, { obj: 'settings', act: 'manage' }, 'deny').finally(() => {
      engine.addRule = addRule
    })
    t.equal(addFailures, 1, 'the in-memory change failed once')
    t.equal(denied.changed, true, 'the committed write is reported, not an error')
    t.equal(denied.revision, await revisionOf(db))
    t.equal(engine.decide(clerk, 'm1', 'settings', 'manage'), false, 'the reload brought the deny')
    t.same(
      engine.rulesOf(clerk.id, ['m1']).filter((r) => r.obj === 'settings').map((r) => r.effect),
      ['deny'],
    )

    // A revoke whose removal fails in memory: left like that, the deny would still hold.
    const removeRule = engine.removeRule
    let removeFailures = 0
    engine.removeRule = async (...args) => {
      if (removeFailures++ === 0) throw new Error('simulated failure applying a change in memory')
      return removeRule.apply(engine, args)
    }
    const revoked = await revokeUserPermission(service, root, clerk.id, { obj: 'settings', act: 'manage' }).finally(() => {
      engine.removeRule = removeRule
    })
    t.equal(revoked.changed, true)
    t.equal(removeFailures, 1)
    t.equal(engine.decide(clerk, 'm1', 'settings', 'manage'), true, 'the reload dropped the revoked deny; the role grant remains')
    t.same(engine.rulesOf(clerk.id, ['m1']).filter((r) => r.obj === 'settings'), [])

    // Memory and a load from the database agree afterwards.
    const fresh = await buildTestService(t, { db: backend === 'postgres' ? secondConnection(t, db) : db })
    t.same(engine.rulesOf(clerk.id, ['m1', 'global']), fresh.engine.rulesOf(clerk.id, ['m1', 'global']))
    t.same(engine.rulesOf('clerk', ['m1', 'global']), fresh.engine.rulesOf('clerk', ['m1', 'global']))
  })
})

t.test('concurrent identical writes make one row and one audit row', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const { service } = ta
  const { clerk, root } = await setting(ta)

  t.test('twenty identical grants over HTTP at once', async (t) => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        ta.call({
          method: 'POST',
          url: '/v2/admin/permissions/roles/clerk/grant',
          body: { command: 'grant-role-permission', data: { obj: 'customers', act: 'export', domain: 'm1' } },
        }),
      ),
    )
    t.same(
      results.map((r) => r.statusCode),
      results.map(() => 200),
    )
    const data = results.map((r) => (r.json() as { data: { changed: boolean; revision: number } }).data)
    t.equal(data.filter((d) => d.changed).length, 1, 'one of them changed something')
    t.equal(new Set(data.map((d) => d.revision)).size, 1, 'all answer the revision of that one change')
    t.equal(data[0]?.revision, await revisionOf(db))
    t.equal(await roleRuleCount(db, 'clerk', 'm1', 'customers', 'export'), 1, 'one casbin_rule row')
    t.equal(await auditCount(db, 'grant', 'clerk', 'customers', 'export'), 1, 'one audit row')
    t.equal(service.engine.decide(clerk, 'm1', 'customers', 'export'), true)
  })

  t.test('twenty identical denies as commands at once', async (t) => {
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () => setUserPermission(service, root, clerk.id, { obj: 'customers', act: 'export' }, 'deny')),
    )
    t.equal(outcomes.filter((o) => o.changed).length, 1)
    t.equal(await count(db, 'SELECT count(*) AS n FROM permission_overrides WHERE user_id = $1', [clerk.id]), 1)
    t.equal(await auditCount(db, 'deny', clerk.id, 'customers', 'export'), 1)
    t.equal(service.engine.decide(clerk, 'm1', 'customers', 'export'), false)
  })

  if (backend === 'postgres') {
    t.test('two replicas on one schema, ten identical writes each, at once', async (t) => {
      const other = await buildTestService(t, { db: secondConnection(t, db) })
      const both = async <T extends { changed: boolean }>(write: (s: Service) => Promise<T>) => {
        const [here, there] = await Promise.all([
          Promise.all(Array.from({ length: 10 }, () => write(service))),
          Promise.all(Array.from({ length: 10 }, () => write(other))),
        ])
        return { here: here.filter((o) => o.changed).length, there: there.filter((o) => o.changed).length }
      }

      const granted = await both((s) => grantRolePermission(s, root, 'clerk', { obj: 'payouts', act: 'approve', domain: 'm1' }))
      t.equal(granted.here + granted.there, 1, 'one write changed something')
      t.equal(await roleRuleCount(db, 'clerk', 'm1', 'payouts', 'approve'), 1)
      t.equal(await auditCount(db, 'grant', 'clerk', 'payouts', 'approve'), 1)
      // The replica whose write committed the row applied it in memory; the
      // other found the row already stored (changed: false) and learns of it
      // from the change feed, by the revision of that write.
      const [winner, loser] = granted.here === 1 ? [service, other] : [other, service]
      t.equal(winner.engine.decide(clerk, 'm1', 'payouts', 'approve'), true, 'the replica that wrote the row allows at once')
      t.equal(await loser.replica.waitFor(winner.replica.revision, 1000), true, 'the other reaches that revision from the feed')
      t.equal(loser.engine.decide(clerk, 'm1', 'payouts', 'approve'), true, 'and allows')

      const denied = await both((s) => setUserPermission(s, root, clerk.id, { obj: 'payouts', act: 'approve' }, 'deny'))
      t.equal(denied.here + denied.there, 1, 'one deny changed something')
      t.equal(await count(db, "SELECT count(*) AS n FROM permission_overrides WHERE user_id = $1 AND obj = 'payouts'", [clerk.id]), 1)
      t.equal(await auditCount(db, 'deny', clerk.id, 'payouts', 'approve'), 1, 'one deny audit row')

      const revoked = await both((s) => revokeUserPermission(s, root, clerk.id, { obj: 'payouts', act: 'approve' }))
      t.equal(revoked.here + revoked.there, 1, 'one revoke changed something')
      t.equal(await count(db, "SELECT count(*) AS n FROM permission_overrides WHERE user_id = $1 AND obj = 'payouts'", [clerk.id]), 0)
      t.equal(await auditCount(db, 'revoke', clerk.id, 'payouts', 'approve'), 1, 'one revoke audit row')

      await Promise.all([service.reload(), other.reload()])
      for (const s of [service, other]) t.equal(s.engine.decide(clerk, 'm1', 'payouts', 'approve'), true)
    })
  }
})

t.test('catalog sync records each lifecycle event once', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const { service } = ta
  const { clerk, root } = await setting(ta)
  const declared = declaredCatalog()
  const key = (p: { obj: string; act: string }) => `${p.obj}:${p.act}`
  const events = async (action: string) =>
    (
      await db.query<{ target_id: string; target_type: string; actor_id: string; actor_type: string }>(
        'SELECT target_id, target_type, actor_id, actor_type FROM permission_audit WHERE action = $1 ORDER BY permission_audit.id',
        [action],
      )
    ).rows
  const catalogAudit = () => count(db, "SELECT count(*) AS n FROM permission_audit WHERE action LIKE 'catalog%'")

  const added = await events('catalog_added')
  t.same(added.map((e) => e.target_id).sort(), declared.map(key).sort(), 'the fresh service added every declared pair')
  t.equal(new Set(added.map((e) => e.target_id)).size, added.length, 'each exactly once')
  t.ok(added.every((e) => e.target_type === 'permission' && e.actor_id === 'system' && e.actor_type === 'system'))
  t.equal(await count(db, 'SELECT count(*) AS n FROM permission_catalog WHERE is_active'), declared.length)

  const auditBefore = await catalogAudit()
  const revisionBefore = await revisionOf(db)
  t.same(await syncCatalog(service, declared), { events: 0, revision: revisionBefore }, 'a second sync records nothing')
  t.equal(await catalogAudit(), auditBefore)
  t.equal(await revisionOf(db), revisionBefore, 'and bumps nothing')

  await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'refund', domain: 'm1' })
  const staff = await register(ta, { email: 'staff@platform.example', sub_role_code: 'support' })
  await setUserPermission(service, root, staff.id, { obj: 'orders', act: 'refund' }, 'allow')
  t.equal(service.engine.decide(clerk, 'm1', 'orders', 'refund'), true)
  t.equal(service.engine.decide(staff, 'm1', 'orders', 'refund'), true)

  const without = declared.filter((p) => key(p) !== 'orders:refund')
  t.equal((await syncCatalog(service, without)).events, 1)
  t.same((await events('catalog_deactivated')).map((e) => e.target_id), ['orders:refund'])
  t.same((await db.query("SELECT is_active FROM permission_catalog WHERE obj = 'orders' AND act = 'refund'")).rows, [{ is_active: false }])
  t.equal(service.engine.isActive('orders', 'refund'), false)
  t.equal(service.engine.decide(clerk, 'm1', 'orders', 'refund'), false, 'a role granted the pair no longer holds it')
  t.equal(service.engine.decide(staff, 'm1', 'orders', 'refund'), false, 'nor a user with an allow override')
  t.equal(service.engine.subRoleAllows('clerk', 'm1', 'orders', 'refund'), false)
  t.equal(await roleRuleCount(db, 'clerk', 'm1', 'orders', 'refund'), 1, 'the grant itself stays stored')
  await t.rejects(
    grantRolePermission(service, root, 'viewer', { obj: 'orders', act: 'refund', domain: 'm1' }),
    { code: 'PERMISSION_NOT_IN_CATALOG' },
    'an inactive pair cannot be granted',
  )
  t.equal((await syncCatalog(service, without)).events, 0, 'deactivated once only')

  t.equal((await syncCatalog(service, declared)).events, 1)
  t.same((await events('catalog_reactivated')).map((e) => e.target_id), ['orders:refund'])
  t.equal(service.engine.decide(clerk, 'm1', 'orders', 'refund'), true, 'the stored grant counts again')
  t.equal(service.engine.decide(staff, 'm1', 'orders', 'refund'), true)
  t.same((await events('catalog_deactivated')).length, 1)
  t.same((await events('catalog_added')).length, declared.length, 'nothing was added twice')

  if (backend === 'postgres') {
    t.test('two replicas syncing at once record each event once', async (t) => {
      const other = await buildTestService(t, { db: secondConnection(t, db) })
      const syncBoth = async (list: readonly PermissionDeclaration[]) => {
        const [a, b] = await Promise.all([syncCatalog(service, list), syncCatalog(other, list)])
        return a.events + b.events
      }
      const fewer = declared.filter((p) => key(p) !== 'payouts:approve')
      const extra = { obj: 'invoices', act: 'read', label: 'View invoices', group: 'Invoices' }

      t.equal(await syncBoth(fewer), 1)
      t.equal(await count(db, "SELECT count(*) AS n FROM permission_audit WHERE action = 'catalog_deactivated' AND target_id = 'payouts:approve'"), 1)
      for (const s of [service, other]) t.equal(s.engine.isActive('payouts', 'approve'), false, 'both engines see it inactive')

      t.equal(await syncBoth([...declared, extra]), 2, 'one reactivation and one addition')
      t.equal(await count(db, "SELECT count(*) AS n FROM permission_audit WHERE action = 'catalog_reactivated' AND target_id = 'payouts:approve'"), 1)
      t.equal(await count(db, "SELECT count(*) AS n FROM permission_audit WHERE action = 'catalog_added' AND target_id = 'invoices:read'"), 1)
      for (const s of [service, other]) {
        t.equal(s.engine.isActive('payouts', 'approve'), true)
        t.equal(s.engine.isActive('invoices', 'read'), true)
      }
      t.equal(await syncBoth([...declared, extra]), 0, 'then nothing more')
    })
  }
})
