/**
 * The Casbin adapter's own suite, run on PGlite and on PostgreSQL. It holds
 * the failures that ruled out casbin-pg-adapter: values that are syntax
 * somewhere else (SQL patterns, regular expressions, CSV commas and quotes)
 * must stay data, a removal must remove exactly one rule, filtered loads
 * must not leak other domains, and nothing may write around the service's
 * transactions.
 */
import { readFileSync } from 'node:fs'
import { newEnforcer, type Enforcer, type Model } from 'casbin'
import t from 'tap'
import { StorageAdapter } from '../../src/engine/adapter.js'
import { parseModel } from '../../src/engine/model.js'
import type { QueryResult, Queryable, Row } from '../../src/storage/db.js'
import { migrate } from '../../src/storage/migrate.js'
import { iterateOverrides, setOverride, type OverrideRow } from '../../src/storage/overrides.js'
import { deleteRule, insertRule, iterateRulePages, iterateRules, type PolicyType } from '../../src/storage/policyRows.js'
import { openPostgres } from '../../src/storage/pg.js'
import { backend, buildTestService, freshDatabase, postgresUrl, secondConnection } from '../helper.js'

const modelText = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')

// Three system-owner users; their ids sort U1 < U2 < U3 as uuids and as text.
const U1 = '11111111-1111-4111-8111-111111111111'
const U2 = '22222222-2222-4222-8222-222222222222'
const U3 = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa'

type Rule = string[]

function rulesIn(model: Model, ptype: 'p' | 'g'): Rule[] {
  return model.model.get(ptype)?.get(ptype)?.policy ?? []
}

const policyOf = (enforcer: Enforcer, ptype: 'p' | 'g'): Rule[] => rulesIn(enforcer.getModel(), ptype)

async function load(db: Queryable, filter?: { domain: string }): Promise<{ enforcer: Enforcer; adapter: StorageAdapter }> {
  const adapter = new StorageAdapter(db)
  const enforcer = await newEnforcer(parseModel(modelText), adapter)
  if (filter !== undefined) await enforcer.loadFilteredPolicy(filter)
  return { enforcer, adapter }
}

/** Every stored rule, in id order, with all six value columns: to prove a table unchanged. */
async function ruleTable(q: Queryable): Promise<Row[]> {
  return (await q.query('SELECT id::text AS id, ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule ORDER BY casbin_rule.id')).rows
}

async function overrideTable(q: Queryable): Promise<Row[]> {
  return (
    await q.query(
      'SELECT user_id::text AS user_id, domain, obj, act, effect, set_by FROM permission_overrides ORDER BY permission_overrides.user_id, domain, obj, act',
    )
  ).rows
}

/** Stored rules as the model should hold them: id order, ptype filter, five p fields or three g fields. */
async function storedRules(q: Queryable, ptype: PolicyType, where = 'TRUE', params: unknown[] = []): Promise<Rule[]> {
  const { rows } = await q.query<Record<string, string>>(
    `SELECT v0, v1, v2, v3, v4 FROM casbin_rule WHERE ptype = '${ptype}' AND (${where}) ORDER BY casbin_rule.id`,
    params,
  )
  return rows.map((r) => (ptype === 'p' ? [r.v0, r.v1, r.v2, r.v3, r.v4] : [r.v0, r.v1, r.v2]).map((v) => v ?? ''))
}

/** Stored overrides as p rules of their user, in the table's key order. */
async function storedOverrides(q: Queryable, where = 'TRUE', params: unknown[] = []): Promise<Rule[]> {
  const { rows } = await q.query<OverrideRow>(
    `SELECT user_id::text AS user_id, domain, obj, act, effect FROM permission_overrides WHERE ${where}
     ORDER BY permission_overrides.user_id, domain, obj, act`,
    params,
  )
  return rows.map((o) => [o.user_id, o.domain, o.obj, o.act, o.effect])
}

async function count(q: Queryable, sql: string, params: unknown[] = []): Promise<number> {
  return Number((await q.query<{ n: string }>(sql, params)).rows[0]?.n)
}

async function reset(db: Queryable): Promise<void> {
  await db.query('DELETE FROM casbin_rule')
  await db.query('DELETE FROM permission_overrides')
}

async function override(db: Queryable, user_id: string, domain: string, obj: string, act: string, effect: 'allow' | 'deny'): Promise<void> {
  await setOverride(db, { user_id, domain, obj, act, effect }, 'adapter-test')
}

/** The real database, with every query's size recorded: shows that rows arrive a page at a time. */
function recording(db: Queryable): { q: Queryable; pages: number[] } {
  const pages: number[] = []
  return {
    pages,
    q: {
      async query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
        const result = await db.query<R>(text, params)
        pages.push(result.rows.length)
        return result
      },
      async queryArrays(text: string, params?: readonly unknown[]): Promise<unknown[][]> {
        const rows = await db.queryArrays(text, params)
        pages.push(rows.length)
        return rows
      },
      exec: (script) => db.exec(script),
    },
  }
}

t.test('the storage adapter', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await db.query("INSERT INTO sub_roles (code) VALUES ('clerk')")
  for (const [id, email] of [
    [U1, 'u1@adapter.example'],
    [U2, 'u2@adapter.example'],
    [U3, 'u3@adapter.example'],
  ]) {
    await db.query(
      "INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, sub_role_code) VALUES ($1, $2, 'x', $2, 'system_owner', 'clerk')",
      [id, email],
    )
  }

  t.test('a full load reproduces the stored p rules, g rules and overrides exactly', async (t) => {
    await reset(db)
    const p: Rule[] = [
      ['clerk', 'm1', 'orders', 'read', 'allow'],
      ['clerk', 'global', 'orders', 'refund', 'allow'],
      ['clerk', 'm2', 'orders', 'read', 'deny'],
      ['viewer', 'm1', 'reports', 'read', 'allow'],
    ]
    const g: Rule[] = [
      [U1, 'clerk', 'm1'],
      [U2, 'viewer', 'global'],
      [U3, 'clerk', 'm2'],
    ]
    for (const rule of p) t.equal(await insertRule(db, 'p', rule), true)
    for (const rule of g) t.equal(await insertRule(db, 'g', rule), true)
    t.equal(await insertRule(db, 'p', p[0] as Rule), false, 'a stored rule is not stored twice')
    await override(db, U3, 'm2', 'customers', 'export', 'allow')
    await override(db, U1, 'm1', 'orders', 'read', 'deny')
    await override(db, U2, 'global', 'payouts', 'read', 'allow')

    const { enforcer, adapter } = await load(db)
    t.equal(adapter.isFiltered(), false)
    t.same(
      policyOf(enforcer, 'p'),
      [...p, [U1, 'm1', 'orders', 'read', 'deny'], [U2, 'global', 'payouts', 'read', 'allow'], [U3, 'm2', 'customers', 'export', 'allow']],
      'p: the rules in id order, then each override as a p rule of its user',
    )
    t.same(policyOf(enforcer, 'g'), g, 'g: the assignments in id order')
    t.equal(await count(db, 'SELECT count(*) AS n FROM casbin_rule'), p.length + g.length, 'overrides stay in their side table')

    t.equal(enforcer.enforceSync(U1, 'm1', 'orders', 'refund'), true, 'a global grant reaches the sub-role in its domain')
    t.equal(enforcer.enforceSync(U1, 'm1', 'orders', 'read'), false, 'a deny override beats the role grant')
    t.equal(enforcer.enforceSync(U3, 'm2', 'orders', 'read'), false, 'a deny row denies')
    t.equal(enforcer.enforceSync(U3, 'm2', 'customers', 'export'), true, 'an allow override allows')
    t.equal(enforcer.enforceSync(U2, 'm9', 'payouts', 'read'), true, 'a global override reaches every domain')
    t.equal(enforcer.enforceSync(U2, 'm1', 'reports', 'read'), false, "a merchant's grant does not reach a global assignment")
  })

  t.test('values that are syntax elsewhere stay data', async (t) => {
    await reset(db)
    const rules: Rule[] = [
      ['like:%', 'm1', 'orders', 'read', 'allow'],
      ['regex:.*', 'm1', 'orders', 'read', 'allow'],
      ['%', 'm1', 'orders', 'read', 'allow'],
      ['_', 'm1', 'orders', 'read', 'allow'],
      ['alice', 'm1', 'orders', 'read', 'allow'],
      ['bob', 'm1', 'orders', 'read', 'allow'],
      ['clerk', 'm1', 'a,b', 'say "hi"', 'deny'],
      ['clerk', 'm1', 'a,b', 'say "hi"', 'allow'],
      ['clerk', 'm1', '', 'read', 'allow'],
      ['clerk', 'm1', '""', "''", 'allow'],
      ['clerk', 'm1', ' ', 'NULL', 'allow'],
      ['clerk', 'm1', '# not a comment', 'p, x, y', 'allow'],
      ['clerk', 'm1', 'line\nbreak', 'tab\there', 'allow'],
      ['clerk', 'm1', 'back\\slash', 'ñandú 🚀', 'allow'],
      // The last field empty: the table pads with '' too, the model must not lose the field.
      ['clerk', 'm1', 'orders', 'trailing', ''],
    ]
    const assignments: Rule[] = [
      [U1, 'clerk', 'm1'],
      [U2, 'clerk', ''],
    ]
    for (const rule of rules) t.equal(await insertRule(db, 'p', rule), true, `stored ${JSON.stringify(rule)}`)
    for (const rule of assignments) t.equal(await insertRule(db, 'g', rule), true)
    await override(db, U1, 'm1', 'x,y', '"z"', 'deny')
    await override(db, U1, 'm1', '%', '_', 'allow')
    await override(db, U1, 'm1', 'regex:.*', 'like:%', 'allow')
    const stored = await db.query<{ v2: string; v3: string }>("SELECT v2, v3 FROM casbin_rule WHERE ptype = 'p' AND v4 = 'deny'")
    t.same(stored.rows, [{ v2: 'a,b', v3: 'say "hi"' }], 'the table holds the values verbatim')

    const { enforcer } = await load(db)
    const p = policyOf(enforcer, 'p')
    t.same(p, [...rules, ...(await storedOverrides(db))], 'every rule reloads as the same array, in order')
    t.same(
      p.map((r) => r.length),
      p.map(() => 5),
      'every p rule has exactly five fields',
    )
    t.same(
      p.filter((r) => r[2] === 'a,b' && r[4] === 'deny'),
      [['clerk', 'm1', 'a,b', 'say "hi"', 'deny']],
      'the deny on an obj with a comma reloads as one deny of five fields',
    )
    t.same(policyOf(enforcer, 'g'), assignments, 'a g rule keeps an empty last field')
    t.same(
      p.filter((r) => r[0] === U1).map((r) => JSON.stringify(r)).sort(),
      [
        [U1, 'm1', '%', '_', 'allow'],
        [U1, 'm1', 'regex:.*', 'like:%', 'allow'],
        [U1, 'm1', 'x,y', '"z"', 'deny'],
      ]
        .map((r) => JSON.stringify(r))
        .sort(),
      'overrides keep their values too',
    )

    t.equal(enforcer.enforceSync(U1, 'm1', 'a,b', 'say "hi"'), false, 'the deny beats the allow of the same pair')
    t.equal(enforcer.enforceSync(U1, 'm1', 'x,y', '"z"'), false)
    t.equal(enforcer.enforceSync(U1, 'm1', '%', '_'), true)
    t.equal(enforcer.enforceSync(U1, 'm1', '%', 'read'), false, '% in an override is not a pattern')
    t.equal(enforcer.enforceSync('like:%', 'm1', 'orders', 'read'), true)
    t.equal(enforcer.enforceSync('carol', 'm1', 'orders', 'read'), false, 'like:% and regex:.* match no other subject')
    t.equal(enforcer.enforceSync(U1, 'm1', 'line\nbreak', 'tab\there'), true)
    t.equal(enforcer.enforceSync(U1, 'm1', 'back\\slash', 'ñandú 🚀'), true)
    t.equal(enforcer.enforceSync(U1, 'm1', '', 'read'), true, 'an empty obj is a value like any other')

    t.test('deleteRule removes exactly the rule named, never a pattern', async (t) => {
      const subjects = async () =>
        (await db.query<{ v0: string }>("SELECT v0 FROM casbin_rule WHERE ptype = 'p' AND v2 = 'orders' AND v3 = 'read' ORDER BY v0 COLLATE \"C\"")).rows.map(
          (r) => r.v0,
        )
      const total = () => count(db, 'SELECT count(*) AS n FROM casbin_rule')
      const before = await total()
      // COLLATE "C" orders by code point, as Array.prototype.sort does for these ASCII strings.
      t.same(await subjects(), ['%', 'alice', 'bob', 'like:%', 'regex:.*', '_'].sort())

      t.equal(await deleteRule(db, 'p', ['like:%', 'm1', 'orders', 'read', 'allow']), true)
      t.equal(await total(), before - 1, 'one row deleted')
      t.same(await subjects(), ['%', 'alice', 'bob', 'regex:.*', '_'].sort())

      t.equal(await deleteRule(db, 'p', ['%', 'm1', 'orders', 'read', 'allow']), true)
      t.equal(await deleteRule(db, 'p', ['_', 'm1', 'orders', 'read', 'allow']), true)
      t.equal(await total(), before - 3, 'a subject % or _ matches only itself')
      t.same(await subjects(), ['alice', 'bob', 'regex:.*'])

      t.equal(await deleteRule(db, 'p', ['like:%', 'm1', 'orders', 'read', 'allow']), false, 'a second removal finds nothing')
      t.equal(await deleteRule(db, 'p', ['.*', 'm1', 'orders', 'read', 'allow']), false)
      t.equal(await deleteRule(db, 'p', ['alice']), false, 'fewer values are not a prefix filter')
      t.equal(await deleteRule(db, 'g', ['alice', 'm1', 'orders', 'read', 'allow']), false, 'the ptype is part of the rule')
      t.equal(await total(), before - 3)

      t.equal(await deleteRule(db, 'p', ['clerk', 'm1', 'a,b', 'say "hi"', 'deny']), true)
      t.equal(await deleteRule(db, 'p', ['clerk', 'm1', 'orders', 'trailing', '']), true)
      t.equal(await deleteRule(db, 'g', [U2, 'clerk', '']), true)
      t.equal(await total(), before - 6)
      const { enforcer } = await load(db)
      t.same(
        policyOf(enforcer, 'p').filter((r) => r[2] === 'a,b'),
        [['clerk', 'm1', 'a,b', 'say "hi"', 'allow']],
        'the allow of the same pair survives the deny’s removal',
      )
      t.equal(enforcer.enforceSync(U1, 'm1', 'a,b', 'say "hi"'), true)
      t.same(policyOf(enforcer, 'g'), [[U1, 'clerk', 'm1']])
    })
  })

  t.test('a NUL byte is refused by the database and nothing is written', async (t) => {
    // PostgreSQL and PGlite both refuse U+0000 in a text value with SQLSTATE
    // 22021 ("invalid byte sequence for encoding UTF8: 0x00"); neither
    // truncates the value at the NUL.
    await reset(db)
    await insertRule(db, 'p', ['clerk', 'm1', 'orders', 'read', 'allow'])
    await insertRule(db, 'g', [U1, 'clerk', 'm1'])
    await override(db, U1, 'm1', 'orders', 'refund', 'allow')
    const rulesBefore = await ruleTable(db)
    const overridesBefore = await overrideTable(db)

    for (let i = 0; i < 5; i++) {
      const rule = ['clerk', 'm1', 'orders', 'export', 'allow']
      rule[i] = `${rule[i] ?? ''}\u0000tail`
      await t.rejects(insertRule(db, 'p', rule), { code: '22021' }, `a NUL in field ${i} is refused`)
    }
    await t.rejects(insertRule(db, 'p', ['\u0000', 'm1', 'orders', 'export', 'allow']), { code: '22021' }, 'a lone NUL is refused')
    await t.rejects(insertRule(db, 'g', [U2, 'clerk\u0000', 'm1']), { code: '22021' })
    await t.rejects(deleteRule(db, 'p', ['clerk\u0000', 'm1', 'orders', 'read', 'allow']), { code: '22021' }, 'and cannot be matched by a delete either')
    await t.rejects(setOverride(db, { user_id: U1, domain: 'm1', obj: 'orders\u0000', act: 'read', effect: 'deny' }, 'adapter-test'), { code: '22021' })
    await t.rejects(
      db.transaction(async (tx) => {
        t.equal(await insertRule(tx, 'p', ['clerk', 'm1', 'orders', 'cancel', 'allow']), true)
        await insertRule(tx, 'p', ['clerk', 'm1', 'orders\u0000', 'cancel', 'allow'])
      }),
      { code: '22021' },
      'a transaction with a NUL value fails as a whole',
    )

    t.same(await ruleTable(db), rulesBefore, 'casbin_rule unchanged: the good row of the failed transaction is gone too')
    t.same(await overrideTable(db), overridesBefore, 'permission_overrides unchanged')
    const { enforcer } = await load(db)
    t.same(policyOf(enforcer, 'p'), [
      ['clerk', 'm1', 'orders', 'read', 'allow'],
      [U1, 'm1', 'orders', 'refund', 'allow'],
    ])
  })

  t.test('a filtered load reads one domain and global, nothing else', async (t) => {
    await reset(db)
    for (const rule of [
      ['clerk', 'm1', 'orders', 'read', 'allow'],
      ['clerk', 'm2', 'orders', 'read', 'allow'],
      ['clerk', 'global', 'orders', 'refund', 'allow'],
      ['viewer', 'm1', 'reports', 'read', 'deny'],
      ['viewer', 'm10', 'reports', 'read', 'allow'],
      ['m1', 'm2', 'm1', 'm1', 'allow'],
    ]) {
      await insertRule(db, 'p', rule)
    }
    for (const rule of [
      [U1, 'clerk', 'm1'],
      [U2, 'clerk', 'm2'],
      [U3, 'viewer', 'global'],
      [U3, 'clerk', 'm1'],
    ]) {
      await insertRule(db, 'g', rule)
    }
    await override(db, U1, 'm1', 'payouts', 'read', 'allow')
    await override(db, U1, 'm2', 'payouts', 'read', 'allow')
    await override(db, U2, 'global', 'customers', 'read', 'deny')
    await override(db, U3, 'm10', 'customers', 'read', 'allow')

    const { enforcer, adapter } = await load(db, { domain: 'm1' })
    t.equal(adapter.isFiltered(), true)
    t.equal(enforcer.isFiltered(), true)
    const expectedP = [
      ...(await storedRules(db, 'p', "v1 IN ('m1', 'global')")),
      ...(await storedOverrides(db, "domain IN ('m1', 'global')")),
    ]
    t.same(policyOf(enforcer, 'p'), expectedP, 'p rows of m1 and global, then overrides of m1 and global')
    t.same(
      expectedP.map((r) => r[1]),
      ['m1', 'global', 'm1', 'm1', 'global'],
      'the expectation itself holds only m1 and global (not m10, not m2)',
    )
    t.same(policyOf(enforcer, 'g'), [
      [U1, 'clerk', 'm1'],
      [U3, 'viewer', 'global'],
      [U3, 'clerk', 'm1'],
    ])
    t.equal(enforcer.enforceSync(U1, 'm1', 'orders', 'refund'), true)
    t.equal(enforcer.enforceSync(U2, 'm2', 'orders', 'read'), false, 'm2 was not loaded')

    // A server that loads one merchant decides exactly as one that loads everything, in that merchant.
    const { enforcer: full } = await load(db)
    const subjects = [U1, U2, U3, 'clerk', 'viewer', 'm1']
    const pairs = [
      ['orders', 'read'],
      ['orders', 'refund'],
      ['reports', 'read'],
      ['payouts', 'read'],
      ['customers', 'read'],
      ['m1', 'm1'],
    ]
    let allowed = 0
    for (const sub of subjects) {
      for (const [obj, act] of pairs as Array<[string, string]>) {
        const decision = full.enforceSync(sub, 'm1', obj, act)
        t.equal(enforcer.enforceSync(sub, 'm1', obj, act), decision, `${sub} ${obj}:${act} in m1`)
        if (decision) allowed++
      }
    }
    t.ok(allowed > 0, `the comparison includes allows (${allowed})`)

    await enforcer.loadPolicy()
    t.equal(adapter.isFiltered(), false, 'a full load clears the flag')
    t.equal(enforcer.isFiltered(), false)
    t.equal(policyOf(enforcer, 'p').length, 6 + 4)
    t.equal(policyOf(enforcer, 'g').length, 4)

    await enforcer.loadFilteredPolicy({ domain: 'm2' })
    t.same(policyOf(enforcer, 'g'), [
      [U2, 'clerk', 'm2'],
      [U3, 'viewer', 'global'],
    ])
    t.same(
      policyOf(enforcer, 'p').map((r) => r[1]),
      ['m2', 'global', 'm2', 'm2', 'global'],
    )

    for (const hostile of ["m1' OR '1'='1", '%', 'm_']) {
      await enforcer.loadFilteredPolicy({ domain: hostile })
      t.same(
        policyOf(enforcer, 'p'),
        [
          ['clerk', 'global', 'orders', 'refund', 'allow'],
          [U2, 'global', 'customers', 'read', 'deny'],
        ],
        `the domain ${JSON.stringify(hostile)} is a value, not SQL or a pattern`,
      )
      t.same(policyOf(enforcer, 'g'), [[U3, 'viewer', 'global']], 'only the global assignment')
    }

    await enforcer.loadPolicy()
    const model = parseModel(modelText)
    for (const bad of [null, undefined, {}, { domain: 1 }, 'm1', ['m1'], { merchant: 'm1' }]) {
      await t.rejects(adapter.loadFilteredPolicy(model, bad), /filter/, `refused: ${JSON.stringify(bad) ?? 'undefined'}`)
    }
    await t.rejects(enforcer.loadFilteredPolicy({ merchant: 'm1' }), /filter/)
    t.equal(adapter.isFiltered(), false, 'a refused filter does not mark the policy filtered')
    t.same(rulesIn(model, 'p'), [], 'nothing was loaded by a refused filter')
  })

  t.test('rows stream a page at a time, each once, in id order', async (t) => {
    await reset(db)
    for (let i = 0; i < 50; i++) {
      if (i % 5 === 4) await insertRule(db, 'g', [[U1, U2, U3][i % 3] as string, `role_${i}`, i % 2 === 0 ? 'm1' : 'm2'])
      else await insertRule(db, 'p', [`role_${i}`, i % 3 === 0 ? 'global' : `m${(i % 2) + 1}`, `obj_${i}`, 'read', i % 7 === 0 ? 'deny' : 'allow'])
    }
    // Gaps in the ids, as deletions leave them.
    await db.query("DELETE FROM casbin_rule WHERE v2 IN ('obj_3', 'obj_11', 'obj_12', 'obj_30') OR v1 = 'role_24'")
    const expected = [
      ...(await db.query<Record<string, string>>('SELECT ptype, v0, v1, v2, v3, v4 FROM casbin_rule ORDER BY casbin_rule.id')).rows,
    ].map((r) => ({ ptype: r.ptype, fields: r.ptype === 'p' ? [r.v0, r.v1, r.v2, r.v3, r.v4] : [r.v0, r.v1, r.v2] }))
    t.equal(expected.length, 45)

    const paged = recording(db)
    const streamed = []
    for await (const row of iterateRules(paged.q, { pageSize: 7 })) streamed.push(row)
    t.same(streamed, expected, 'all 45 rows, each once, in id order')
    t.same(paged.pages, [7, 7, 7, 7, 7, 7, 3], 'seven pages of at most seven rows')

    const exact = recording(db)
    const again = []
    for await (const row of iterateRules(exact.q, { pageSize: 9 })) again.push(row)
    t.same(again, expected, 'a page size dividing the row count')
    t.same(exact.pages, [9, 9, 9, 9, 9, 0], 'the last full page is followed by one empty read')

    const filtered = recording(db)
    const m1 = []
    for await (const row of iterateRules(filtered.q, { domain: 'm1', pageSize: 7 })) m1.push(row)
    const expectedM1 = expected.filter((r) => (r.ptype === 'p' ? ['m1', 'global'].includes(r.fields[1] ?? '') : r.fields[2] === 'm1'))
    t.same(m1, expectedM1, 'a filtered stream pages over the filtered rows')
    t.ok(filtered.pages.every((n) => n <= 7))

    // The next page is asked for before this one is handed out; a reader that stops early leaves nothing running.
    const early = recording(db)
    const firstPage = []
    for await (const page of iterateRulePages(early.q, { pageSize: 7 })) {
      firstPage.push(...page)
      break
    }
    t.same(firstPage, expected.slice(0, 7), 'the first page')
    t.same(early.pages, [7, 7], 'the second page was read ahead, and nothing after it')
    const count = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')
    t.equal(count.rows[0]?.n, 45, 'the connection answers after a reader stopped early')

    // Keys that share prefixes (same user, same domain, same obj) and differ in case.
    const keys: Array<[string, string, string, string]> = [
      [U2, 'm1', 'orders', 'read'],
      [U1, 'm1', 'orders', 'refund'],
      [U1, 'm1', 'orders', 'read'],
      [U1, 'm1', 'Orders', 'read'],
      [U1, 'm2', 'orders', 'read'],
      [U1, 'global', 'orders', 'read'],
      [U3, 'm1', 'a', 'b'],
      [U3, 'm1', 'a', 'B'],
      [U3, 'm1', 'A', 'b'],
      [U2, 'global', 'payouts', 'read'],
      [U2, 'm1', 'orders', 'cancel'],
      [U3, 'm2', '', 'x'],
      [U1, 'm1', 'orders_', 'read'],
    ]
    for (const [i, [user, domain, obj, act]] of keys.entries()) await override(db, user, domain, obj, act, i % 4 === 0 ? 'deny' : 'allow')
    const expectedOverrides = (await storedOverrides(db)).map(([user_id, domain, obj, act, effect]) => ({ user_id, domain, obj, act, effect, expires_at: null }))
    t.equal(expectedOverrides.length, keys.length)

    const pagedOverrides = recording(db)
    const overrides: OverrideRow[] = []
    for await (const o of iterateOverrides(pagedOverrides.q, { pageSize: 3 })) overrides.push(o)
    t.same(overrides, expectedOverrides, 'all 13 overrides, each once, in key order')
    t.same(pagedOverrides.pages, [3, 3, 3, 3, 1])

    const m1Overrides: OverrideRow[] = []
    for await (const o of iterateOverrides(db, { domain: 'm1', pageSize: 3 })) m1Overrides.push(o)
    t.same(
      m1Overrides,
      expectedOverrides.filter((o) => o.domain === 'm1' || o.domain === 'global'),
      'a filtered stream of overrides',
    )
    t.equal(m1Overrides.length, 11)
  })

  t.test('20,000 rules load in full', async (t) => {
    await reset(db)
    const inserted = await db.query(
      `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4)
       SELECT 'p', 'role_' || (i % 100), 'm' || (i % 50), 'obj_' || i, 'read', CASE WHEN i % 10 = 0 THEN 'deny' ELSE 'allow' END
       FROM generate_series(1, 20000) AS i`,
    )
    t.equal(inserted.rowCount, 20000)
    const paged = recording(db)
    const started = performance.now()
    const { enforcer } = await load(paged.q)
    t.comment(`loaded 20,000 rules in ${Math.round(performance.now() - started)} ms`)
    const p = policyOf(enforcer, 'p')
    t.equal(p.length, 20000)
    t.same(p[0], ['role_1', 'm1', 'obj_1', 'read', 'allow'])
    t.same(p[19999], ['role_0', 'm0', 'obj_20000', 'read', 'deny'])
    t.same(paged.pages, [10000, 10000, 0, 0], 'two pages of rules, an empty read, and no overrides')
    t.equal(enforcer.enforceSync('role_7', 'm7', 'obj_7', 'read'), true)
    t.equal(enforcer.enforceSync('role_10', 'm10', 'obj_10', 'read'), false)
    await reset(db)
  })

  t.test('writes through the adapter are refused, so nothing bypasses the transaction', async (t) => {
    await reset(db)
    await insertRule(db, 'p', ['clerk', 'm1', 'orders', 'read', 'allow'])
    await insertRule(db, 'g', [U1, 'clerk', 'm1'])
    const before = await ruleTable(db)
    const adapter = new StorageAdapter(db)
    await t.rejects(adapter.savePolicy(), /commands/)
    await t.rejects(adapter.addPolicy(), /commands/)
    await t.rejects(adapter.removePolicy(), /commands/)
    await t.rejects(adapter.removeFilteredPolicy(), /commands/)

    // An enforcer left with auto-save on (the service turns it off) fails its writes too.
    const { enforcer } = await load(db)
    await t.rejects(enforcer.addPolicy('clerk', 'm1', 'orders', 'refund', 'allow'), /commands/)
    await t.rejects(enforcer.addGroupingPolicy(U2, 'clerk', 'm1'), /commands/)
    await t.rejects(enforcer.removePolicy('clerk', 'm1', 'orders', 'read', 'allow'), /commands/)
    await t.rejects(enforcer.removeFilteredPolicy(0, 'clerk'), /commands/)
    await t.rejects(enforcer.savePolicy(), /commands/)
    t.same(await ruleTable(db), before, 'casbin_rule unchanged')
    t.equal(await count(db, 'SELECT count(*) AS n FROM permission_overrides'), 0)
    t.same(policyOf(enforcer, 'p'), [['clerk', 'm1', 'orders', 'read', 'allow']], 'the refused writes left memory as loaded')
    t.same(policyOf(enforcer, 'g'), [[U1, 'clerk', 'm1']])
  })

  t.test('a service loads the stored policy, and again after reload()', async (t) => {
    await reset(db)
    await insertRule(db, 'p', ['clerk', 'm1', 'orders', 'read', 'allow'])
    await insertRule(db, 'p', ['clerk', 'global', 'orders', 'refund', 'allow'])
    await insertRule(db, 'g', [U1, 'clerk', 'm1'])
    await override(db, U1, 'm1', 'orders', 'refund', 'deny')
    const service = await buildTestService(t, { db })
    const expectations: Array<[string, string, string, string, boolean]> = [
      [U1, 'm1', 'orders', 'read', true],
      [U1, 'm1', 'orders', 'refund', false],
      [U1, 'm2', 'orders', 'read', false],
      [U1, 'm1', 'orders', 'cancel', false],
    ]
    const answers = (engine: typeof service.engine) => expectations.map(([s, d, o, a]) => engine.enforce(s, d, o, a))
    t.same(answers(service.engine), expectations.map((e) => e[4]))

    // Rows written behind the service's back (another tool) reach it on reload.
    await insertRule(db, 'p', ['clerk', 'm1', 'orders', 'cancel', 'allow'])
    t.equal(service.engine.enforce(U1, 'm1', 'orders', 'cancel'), false, 'memory is not the database')
    await service.reload()
    t.equal(service.engine.enforce(U1, 'm1', 'orders', 'cancel'), true, 'reload reads the new row')
    t.same(answers(service.engine).slice(0, 3), [true, false, false], 'and still holds the rules it had')

    if (backend === 'postgres') {
      t.test('two services on one PostgreSQL schema load the same policy', async (t) => {
        const other = await buildTestService(t, { db: secondConnection(t, db) })
        t.same(answers(other.engine), answers(service.engine))
        t.same(other.engine.rulesOf('clerk', ['m1', 'global']), service.engine.rulesOf('clerk', ['m1', 'global']))
        t.same(other.engine.rulesOf(U1, ['m1']), service.engine.rulesOf(U1, ['m1']))
        const [a, b] = await Promise.all([load(db), load(secondConnection(t, db))])
        t.same(policyOf(b.enforcer, 'p'), policyOf(a.enforcer, 'p'))
        t.same(policyOf(b.enforcer, 'g'), policyOf(a.enforcer, 'g'))
        t.same(policyOf(a.enforcer, 'p'), [...(await storedRules(db, 'p')), ...(await storedOverrides(db))])
      })

      t.test('an idle pooled connection dropped by the server does not crash the process', async (t) => {
        // Open a few pooled connections of this service and leave them idle.
        const opened = await Promise.all(
          Array.from({ length: 3 }, () => service.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_sleep(0.05)')),
        )
        const pids = [...new Set(opened.map((r) => r.rows[0]?.pid))]
        t.ok(pids.length >= 2, `the pool holds ${pids.length} connections`)
        // From another connection. Only this service's connections: other test
        // files run at the same time against the same database.
        const admin = openPostgres({ url: postgresUrl ?? '', max: 1 })
        t.teardown(() => admin.close())
        const terminated = await admin.query<{ pid: number; ok: boolean }>(
          `SELECT pid, pg_terminate_backend(pid) AS ok FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle' AND pid = ANY($1::int[])`,
          [pids],
        )
        const killed = terminated.rows.filter((r) => r.ok)
        t.ok(killed.length >= 1, `terminated ${killed.length} idle connections`)
        for (let i = 0; i < 100; i++) {
          if ((await count(admin, 'SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])', [pids])) === 0) break
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
        t.equal(await count(admin, 'SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])', [pids]), 0, 'the server ended them')

        t.equal((await service.readiness()) === 'ready', true, 'the next query works')
        const fresh = await service.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        t.notOk(
          killed.some((r) => r.pid === fresh.rows[0]?.pid),
          'on a new connection',
        )
        await service.reload()
        t.equal(service.engine.enforce(U1, 'm1', 'orders', 'read'), true, 'a reload after the drop reads the policy')
        t.equal(
          await service.db.transaction(async (tx) => count(tx, 'SELECT count(*) AS n FROM casbin_rule')),
          (await ruleTable(db)).length,
          'transactions work too',
        )
      })
    } else {
      t.test('on PGlite, a fresh engine over the same store reads what the service wrote', async (t) => {
        const reopened = await load(db)
        t.same(policyOf(reopened.enforcer, 'p'), [...(await storedRules(db, 'p')), ...(await storedOverrides(db))])
        t.equal(reopened.enforcer.enforceSync(U1, 'm1', 'orders', 'cancel'), true)
        t.equal(reopened.enforcer.enforceSync(U1, 'm1', 'orders', 'refund'), false)
        t.same(
          expectations.map(([s, d, o, a]) => reopened.enforcer.enforceSync(s, d, o, a)).slice(0, 3),
          answers(service.engine).slice(0, 3),
          'it answers as the service engine does',
        )
      })
    }
  })
})
