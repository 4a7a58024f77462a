import t from 'tap'
import type { Queryable } from '../../src/storage/db.js'
import { migrate } from '../../src/storage/migrate.js'
import { setOverride } from '../../src/storage/overrides.js'
import { insertRule, iterateRulePages, type RuleRow } from '../../src/storage/policyRows.js'
import { readStoredPolicy } from '../../src/storage/storedPolicy.js'
import { freshDatabase, postgresUrl } from '../helper.js'

/**
 * The full read of the policy (start-up, export, import's comparison) goes
 * through `COPY ... TO STDOUT` on PostgreSQL and through pages of rows
 * elsewhere. The same database read both ways must give the same rows, in
 * the same order, whatever the values hold.
 */

/** The same connection without its COPY stream: the paged read, as PGlite always reads. */
const paged = (q: Queryable): Queryable => ({ query: q.query.bind(q), queryArrays: q.queryArrays.bind(q), exec: q.exec.bind(q) })

async function rows(pages: AsyncIterable<RuleRow[]>): Promise<RuleRow[]> {
  const all: RuleRow[] = []
  for await (const page of pages) all.push(...page)
  return all
}

const U1 = '00000000-0000-4000-8000-0000000000a1'
const U2 = '00000000-0000-4000-8000-0000000000a2'
const ODD_DOMAIN = "m'1\\x"
// What COPY's text format escapes or could mistake, and what a split on bytes could cut.
const AWKWARD = ['a\tb', 'line\nbreak', 'cr\rhere', 'back\\slash', '\\N', "it's", 'comma,"quoted"', 'é', '🧾 receipt', 'bell\u0007', 'ends with \\']

t.test('rules read through COPY are the rules read in pages', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  if (postgresUrl !== undefined) t.ok(db.copyText, 'PostgreSQL reads through COPY, so the two reads below differ')
  else t.equal(db.copyText, undefined, 'PGlite has no COPY stream: both reads below are the paged one, and must still agree')

  await db.query("INSERT INTO sub_roles (code) VALUES ('clerk')")
  for (const [id, email] of [
    [U1, 'u1@rows.example'],
    [U2, 'u2@rows.example'],
  ]) {
    await db.query("INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, sub_role_code) VALUES ($1, $2, 'x', $2, 'system_owner', 'clerk')", [id, email])
  }
  for (const [i, value] of AWKWARD.entries()) await insertRule(db, 'p', ['clerk', 'm1', `obj ${value}`, `act${i}`, 'allow'])
  await insertRule(db, 'p', ['clerk', ODD_DOMAIN, 'orders', 'read', 'allow'])
  await insertRule(db, 'g', [U1, 'clerk', ODD_DOMAIN])
  await insertRule(db, 'p', ['clerk', 'global', 'reports', 'read', 'allow'])
  await insertRule(db, 'g', [U2, 'platform', 'global'])
  await insertRule(db, 'g', [U1, 'clerk', 'm2'])
  // A rule with an empty field inside and empty ones at the end, and one of a shape the service never writes.
  await insertRule(db, 'p', ['clerk', 'm1', '', 'read'])
  await db.query("INSERT INTO casbin_rule (ptype, v0) VALUES ('p2', 'x')")
  // Enough long rows that a row is cut between two chunks of the stream many times over.
  await db.query(
    `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4)
     SELECT 'p', 'role_' || i, 'm' || (i % 3), repeat('é', 90 + i % 7), 'act' || i, 'allow' FROM generate_series(1, 3000) AS i`,
  )

  const all = await rows(iterateRulePages(paged(db)))
  t.equal(all.length, AWKWARD.length + 7 + 3000, 'every row, read in pages')
  t.same(await rows(iterateRulePages(db)), all, 'the whole table: the same rows in the same order')
  t.same(await rows(iterateRulePages(db, { pageSize: 7 })), all, 'in COPYs of 7 rows (a page boundary on every seventh row)')
  t.same(await rows(iterateRulePages(db, { pageSize: AWKWARD.length + 7 + 3000 })), all, 'in one COPY exactly as long as the table')
  t.same(await db.snapshot((tx) => rows(iterateRulePages(tx))), all, 'inside a snapshot, as the start-up reads')
  t.same(
    all.filter((r) => r.fields[2]?.startsWith('obj ')).map((r) => r.fields[2]),
    AWKWARD.map((v) => `obj ${v}`),
    'each awkward value comes back as written',
  )
  t.same(
    all.find((r) => r.ptype === 'p' && r.fields[2] === ''),
    { ptype: 'p', fields: ['clerk', 'm1', '', 'read'] },
    'an empty field inside is kept, the empty ones at the end dropped',
  )

  for (const domain of ['m1', ODD_DOMAIN, 'nowhere']) {
    const filtered = await rows(iterateRulePages(paged(db), { domain }))
    t.same(await rows(iterateRulePages(db, { domain })), filtered, `domain ${JSON.stringify(domain)}: the same rows`)
    t.ok(
      filtered.every((r) => [domain, 'global'].includes((r.ptype === 'g' ? r.fields[2] : r.fields[1]) ?? '')),
      `domain ${JSON.stringify(domain)}: only its rows and global's`,
    )
  }
  t.equal((await rows(iterateRulePages(db, { domain: ODD_DOMAIN }))).filter((r) => r.fields.includes(ODD_DOMAIN)).length, 2, 'a quote and a backslash in the domain are data')
})

t.test('a read stopped early leaves its connection usable', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await db.query(`INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4) SELECT 'p', 'r' || i, 'm1', 'o', 'a', 'allow' FROM generate_series(1, 20000) AS i`)
  const first = async (q: Queryable) => {
    for await (const page of iterateRulePages(q, { pageSize: 20000 })) return page.length
    return 0
  }
  const next = await db.snapshot(async (tx) => {
    t.ok((await first(tx)) > 0, 'one page read inside a snapshot')
    return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')).rows[0]?.n
  })
  t.equal(next, 20000, 'the next statement of the snapshot answers')
  t.ok((await first(db)) > 0, 'one page read on the pool')
  t.equal((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM casbin_rule')).rows[0]?.n, 20000, 'the pool answers the next statement')
})

t.test('the stored policy is the same read either way, expired overrides left out', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await db.query("INSERT INTO sub_roles (code) VALUES ('clerk')")
  await db.query("INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, sub_role_code) VALUES ($1, 'u1@stored.example', 'x', 'u1', 'system_owner', 'clerk')", [U1])
  const now = Date.now()
  await insertRule(db, 'p', ['clerk', 'm1', 'orders', 'read', 'allow'])
  await insertRule(db, 'p', ['clerk', 'm2', 'orders', 'refund', 'allow'])
  await insertRule(db, 'p', ['clerk', 'm1', 'retired', 'read', 'allow'])
  await insertRule(db, 'g', [U1, 'clerk', 'm1'])
  await setOverride(db, { user_id: U1, domain: 'm1', obj: 'orders', act: 'refund', effect: 'allow', expires_at: new Date(now - 60_000) }, 'rows-test', new Date(now - 120_000))
  await setOverride(db, { user_id: U1, domain: 'm1', obj: 'payouts', act: 'read', effect: 'deny', expires_at: new Date(now + 60_000) }, 'rows-test')
  await setOverride(db, { user_id: U1, domain: 'm2', obj: 'orders', act: 'read', effect: 'allow' }, 'rows-test')
  const isActive = (obj: string) => obj !== 'retired'

  for (const domain of [undefined, 'm1']) {
    const byCopy = await readStoredPolicy(db, isActive, domain, now)
    t.same(byCopy, await readStoredPolicy(paged(db), isActive, domain, now), `${domain ?? 'every domain'}: the same policy`)
    t.notOk([...byCopy.overrides.keys()].some((key) => key.includes('refund')), `${domain ?? 'every domain'}: the expired override is not read`)
  }
  const whole = await readStoredPolicy(db, isActive, undefined, now)
  t.same([whole.roles.size, whole.groupings.size, whole.overrides.size, whole.dormant], [2, 1, 2, 1], 'two roles, one grouping, two overrides in force, one dormant rule')
})
