/**
 * The Casbin adapter's own suite, including the failures that ruled out
 * casbin-pg-adapter: pattern-like values, commas and quotes, NUL bytes,
 * filtered loads, streaming, and writes that must not bypass the transaction.
 */
import { newEnforcer, type Enforcer } from 'casbin'
import t from 'tap'
import { StorageAdapter } from '../../src/engine/adapter.js'
import { parseModel } from '../../src/engine/model.js'
import { migrate } from '../../src/storage/migrate.js'
import { iterateOverrides } from '../../src/storage/overrides.js'
import { deleteRule, insertRule, iterateRules } from '../../src/storage/policyRows.js'
import type { Database } from '../../src/storage/db.js'
import { backend, freshDatabase, secondConnection } from '../helper.js'
import { readFileSync } from 'node:fs'

const modelText = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
const policy = (e: Enforcer, ptype: 'p' | 'g') => e.getModel().model.get(ptype)?.get(ptype)?.policy ?? []

async function loaded(db: Database, filter?: { domain: string }): Promise<{ enforcer: Enforcer; adapter: StorageAdapter }> {
  const adapter = new StorageAdapter(db)
  const enforcer = await newEnforcer(parseModel(modelText), adapter)
  if (filter !== undefined) await enforcer.loadFilteredPolicy(filter)
  return { enforcer, adapter }
}

t.test('the storage adapter', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const userId = '11111111-1111-4111-8111-111111111111'
  await db.query(
    "INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, sub_role_code) VALUES ($1, 'u@x.example', 'x', 'U', 'system_owner', 'super_admin')",
    [userId],
  )

  t.test('values stay data: commas, quotes, patterns', async (t) => {
    const rules = [
      ['like:%', 'm1', 'orders', 'read', 'allow'],
      ['regex:.*', 'm1', 'orders', 'read', 'allow'],
      ['%', 'm1', 'orders', 'read', 'allow'],
      ['alice', 'm1', 'orders', 'read', 'allow'],
      ['clerk', 'm1', 'a,b', 'say "hi"', 'deny'],
      ['clerk', 'm1', " spaced ", "it's", 'allow'],
    ]
    for (const rule of rules) t.equal(await insertRule(db, 'p', rule), true)
    t.equal(await insertRule(db, 'p', rules[0] as string[]), false, 'a stored rule is not inserted twice')
    await insertRule(db, 'g', [userId, 'clerk', 'm1'])
    await db.query("INSERT INTO permission_overrides (user_id, domain, obj, act, effect, set_by) VALUES ($1, 'm1', 'x,y', 'z', 'deny', 'test')", [userId])
    const { enforcer, adapter } = await loaded(db)
    t.equal(adapter.isFiltered(), false)
    const p = policy(enforcer, 'p')
    for (const rule of rules) t.ok(p.some((r) => JSON.stringify(r) === JSON.stringify(rule)), `reloaded exactly: ${JSON.stringify(rule)}`)
    t.ok(p.some((r) => JSON.stringify(r) === JSON.stringify([userId, 'm1', 'x,y', 'z', 'deny'])), 'overrides load as p rows of the user')
    t.ok(p.every((r) => r.length === 5), 'every p rule keeps its five fields')
    t.same(policy(enforcer, 'g'), [[userId, 'clerk', 'm1']])
    t.equal(enforcer.enforceSync('clerk', 'm1', 'a,b', 'say "hi"'), false, 'the deny on a comma-holding obj stays a deny')
    t.equal(enforcer.enforceSync('clerk', 'm1', ' spaced ', "it's"), true)

    t.equal(await deleteRule(db, 'p', ['like:%', 'm1', 'orders', 'read', 'allow']), true)
    const left = (await db.query<{ v0: string }>("SELECT v0 FROM casbin_rule WHERE ptype = 'p' AND v2 = 'orders' ORDER BY v0")).rows.map((r) => r.v0)
    t.same(left, ['%', 'alice', 'regex:.*'], 'exactly one row deleted, no pattern matching')
    t.equal(await deleteRule(db, 'p', ['like:%', 'm1', 'orders', 'read', 'allow']), false)
  })

  t.test('a NUL byte is refused and nothing is written', async (t) => {
    const before = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')).rows[0]?.n
    await t.rejects(insertRule(db, 'p', ['nul\u0000role', 'm1', 'orders', 'read', 'allow']))
    await t.rejects(
      db.transaction(async (tx) => {
        await insertRule(tx, 'p', ['fine', 'm1', 'orders', 'read', 'allow'])
        await insertRule(tx, 'p', ['bad', 'm1', 'orders\u0000', 'read', 'allow'])
      }),
    )
    t.equal((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')).rows[0]?.n, before)
  })

  t.test('filtered loads: one domain plus global', async (t) => {
    await insertRule(db, 'p', ['clerk', 'm2', 'orders', 'read', 'allow'])
    await insertRule(db, 'p', ['clerk', 'global', 'orders', 'cancel', 'allow'])
    await insertRule(db, 'g', [userId, 'clerk', 'm2'])
    await db.query("INSERT INTO permission_overrides (user_id, domain, obj, act, effect, set_by) VALUES ($1, 'global', 'g', 'h', 'allow', 'test')", [userId])
    const { enforcer, adapter } = await loaded(db, { domain: 'm2' })
    t.equal(adapter.isFiltered(), true)
    const domains = new Set(policy(enforcer, 'p').map((r) => r[1]))
    t.same([...domains].sort(), ['global', 'm2'])
    t.same(policy(enforcer, 'g'), [[userId, 'clerk', 'm2']])
    t.ok(policy(enforcer, 'p').some((r) => r[0] === userId && r[1] === 'global'), 'global overrides come along')
    await enforcer.loadPolicy()
    t.equal(adapter.isFiltered(), false, 'a full load clears the flag')
    await t.rejects(enforcer.loadFilteredPolicy({ merchant: 'm2' }), /filter/)
  })

  t.test('rows stream a page at a time, each once, in id order', async (t) => {
    await db.query(
      "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4) SELECT 'p', 'bulk_' || i, 'm3', 'orders', 'read', 'allow' FROM generate_series(1, 50) AS i",
    )
    const all = (await db.query<{ id: string }>('SELECT id::text AS id FROM casbin_rule ORDER BY casbin_rule.id')).rows.length
    const ids: string[] = []
    for await (const row of iterateRules(db, { pageSize: 7 })) ids.push(`${row.ptype}:${row.fields.join('|')}`)
    t.equal(ids.length, all)
    t.equal(new Set(ids).size, all, 'no row twice')
    for (let i = 0; i < 13; i++) {
      await db.query("INSERT INTO permission_overrides (user_id, domain, obj, act, effect, set_by) VALUES ($1, 'm4', $2, 'read', 'allow', 'test')", [userId, `o${i}`])
    }
    const overrides: string[] = []
    for await (const o of iterateOverrides(db, { pageSize: 3 })) overrides.push(`${o.domain}|${o.obj}|${o.act}`)
    const stored = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_overrides')).rows[0]?.n
    t.equal(overrides.length, stored)
    t.equal(new Set(overrides).size, stored)
  })

  t.test('a larger policy loads in full', async (t) => {
    await db.query(
      "INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4) SELECT 'p', 'role_' || (i % 100), 'm' || (i % 50), 'o' || i, 'read', 'allow' FROM generate_series(1, 20000) AS i",
    )
    const total = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM casbin_rule WHERE ptype = 'p'")).rows[0]?.n ?? 0
    const overrides = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_overrides')).rows[0]?.n ?? 0
    const { enforcer } = await loaded(db)
    t.equal(policy(enforcer, 'p').length, total + overrides)
  })

  t.test('writes cannot go around the service transaction', async (t) => {
    const adapter = new StorageAdapter(db)
    await t.rejects(adapter.savePolicy(), /commands/)
    await t.rejects(adapter.addPolicy(), /commands/)
    await t.rejects(adapter.removePolicy(), /commands/)
    await t.rejects(adapter.removeFilteredPolicy(), /commands/)
  })

  if (backend === 'postgres') {
    t.test('another connection reads the same policy, and dropped idle connections are replaced', async (t) => {
      const other = secondConnection(t, db as { schema?: string })
      const [a, b] = await Promise.all([loaded(db), loaded(other)])
      t.equal(policy(a.enforcer, 'p').length, policy(b.enforcer, 'p').length)
      // The other pool's only idle connection is dropped by the server.
      const pid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid
      const killed = await db.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid])
      t.same(killed.rows, [{ ok: true }])
      await new Promise((resolve) => setTimeout(resolve, 100))
      const again = await other.query<{ one: number }>('SELECT 1 AS one')
      t.same(again.rows, [{ one: 1 }], 'the pool replaced the dropped connection')
    })
  } else {
    t.test('a second load on the same store reads the same policy', async (t) => {
      const [a, b] = await Promise.all([loaded(db), loaded(db)])
      t.equal(policy(a.enforcer, 'p').length, policy(b.enforcer, 'p').length)
    })
  }
})
