import { randomUUID } from 'node:crypto'
import t from 'tap'
import { SYSTEM_ACTOR, denyEntry, grantEntry, revokeEntry, roleHolder, userHolder, type AuditEntry } from '../../src/domain/audit.js'
import { ChainVerifier } from '../../src/domain/auditChain.js'
import { changeItemsOf } from '../../src/domain/changeItems.js'
import { ruleAdded, ruleRemoved, type StoreChange } from '../../src/domain/changes.js'
import { auditHead, iterateAuditChain } from '../../src/storage/audit.js'
import { BULK_AUDIT_ROWS, takesBulk } from '../../src/storage/bulkWrite.js'
import type { Queryable, Row } from '../../src/storage/db.js'
import { migrate } from '../../src/storage/migrate.js'
import { insertRule, insertRules } from '../../src/storage/policyRows.js'
import { LOCK_REVISION, lockedRevision } from '../../src/storage/revision.js'
import { recordWrite } from '../../src/storage/writeRecord.js'
import { backend, freshDatabase } from '../helper.js'

const USER = '0b7e8a52-1c1d-4c39-9a55-7d0f6f0e2b11'

/** A write of many rule changes, as an import makes: role grants, denies and revokes, a merchant user's overrides, odd characters. */
function bigWrite(): { audit: AuditEntry[]; changes: StoreChange[] } {
  const audit: AuditEntry[] = []
  const changes: StoreChange[] = []
  for (let i = 0; i < BULK_AUDIT_ROWS + 700; i++) {
    // Characters COPY's text format escapes (backslash, tab, line ends) and a quote JSON escapes, in a few codes.
    const code = i % 997 === 0 ? `odd\\${i}\t"x"\n\r` : `r${i}`
    const pair = { obj: `obj${i % 7}`, act: 'read', domain: i % 3 === 0 ? 'global' : 'm1' }
    const values = [code, pair.domain, pair.obj, pair.act]
    if (i % 5 === 4) {
      audit.push(revokeEntry(roleHolder(code), pair, SYSTEM_ACTOR))
      changes.push(ruleRemoved('p', [...values, 'allow']))
    } else if (i % 11 === 0) {
      audit.push(denyEntry(userHolder({ id: USER, merchant_id: 'm1' }), { ...pair, domain: 'm1' }, SYSTEM_ACTOR))
      changes.push(ruleAdded('p', [USER, 'm1', pair.obj, pair.act, 'deny'], new Date(Date.UTC(2031, 0, 1 + (i % 20)))))
    } else {
      audit.push(grantEntry(roleHolder(code), pair, SYSTEM_ACTOR))
      changes.push(ruleAdded('p', [...values, 'allow']))
    }
  }
  return { audit, changes }
}

const ITEM_COLUMNS = 'idx, kind, domain, audience, sub_role, user_id, obj, act, effect, expires_at, event, actor_id'
const AUDIT_CONTENT = 'action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip'

t.test('a write of many rows records the same audit rows, chain, feed row and stream items through COPY as through one statement', async (t) => {
  const db = await freshDatabase(t, { migrated: true })
  await migrate(db)
  const { audit, changes } = bigWrite()
  const items = changeItemsOf(audit, changes)
  const write = (through: (tx: Queryable) => Queryable) =>
    db.transaction(
      async (tx: Queryable, opened: Row[]) => {
        const { revision, head } = lockedRevision(opened)
        const record = { revision: revision + 1, head, writeId: randomUUID(), audit, changes, items, retentionDays: 7 }
        const q = through(tx)
        const bulk = takesBulk(q, record)
        await recordWrite(q, record)
        return { revision: revision + 1, bulk }
      },
      { opening: LOCK_REVISION },
    )
  const copied = await write((tx) => tx)
  // The same write again without COPY: recordWrite's one statement.
  const bound = await write((tx) => ({ query: tx.query.bind(tx), queryArrays: tx.queryArrays.bind(tx), exec: tx.exec.bind(tx) }))
  t.equal(copied.bulk, backend === 'postgres', 'PostgreSQL copies the first write in; PGlite binds it')
  t.equal(bound.bulk, false)

  const itemsOf = async (revision: number) => (await db.query(`SELECT ${ITEM_COLUMNS} FROM change_items WHERE revision = $1 ORDER BY idx`, [revision])).rows
  const copiedItems = await itemsOf(copied.revision)
  t.equal(copiedItems.length, items.length, 'every stream item')
  t.same(copiedItems, await itemsOf(bound.revision), 'the same stream items, in the same order')

  const feedOf = async (revision: number) => (await db.query<{ changes: unknown }>('SELECT changes FROM store_changes WHERE revision = $1', [revision])).rows[0]?.changes
  const feed = await feedOf(copied.revision)
  t.same(typeof feed === 'string' ? JSON.parse(feed) : feed, changes, 'the feed row holds every change')
  t.same(await feedOf(copied.revision), await feedOf(bound.revision), 'the same feed row')

  const rows = (await db.query<Record<string, unknown>>(`SELECT id::text AS id, ${AUDIT_CONTENT} FROM permission_audit ORDER BY permission_audit.id`)).rows
  t.equal(rows.length, 2 * audit.length)
  t.same(
    rows.map((r) => r.id),
    rows.map((_, i) => String(i + 1)),
    'audit ids one after another, with no gap between the two writes',
  )
  const content = (r: Record<string, unknown>) => ({ ...r, id: undefined })
  t.same(rows.slice(0, audit.length).map(content), rows.slice(audit.length).map(content), 'the same audit rows, in the same order')
  const verifier = new ChainVerifier()
  for await (const row of iterateAuditChain(db)) verifier.push(row)
  t.equal(verifier.finish(await auditHead(db)), null, 'the chain verifies across both writes')
  t.equal(verifier.rows, 2 * audit.length)
  const { rows: revision } = await db.query<{ revision: string }>('SELECT revision::text AS revision FROM store_revision')
  t.equal(revision[0]?.revision, String(bound.revision))
})

t.test('many policy rows are copied in where the store takes COPY, each reported as one statement at a time reports it', async (t) => {
  const db = await freshDatabase(t, { migrated: true })
  await migrate(db)
  // Rules stored already, repeated in the list, and odd characters COPY escapes, among many new ones.
  const rulesOf = (role: string) =>
    Array.from({ length: BULK_AUDIT_ROWS + 50 }, (_, i) => [i % 997 === 0 ? `${role}\\${i}\t"x"\n` : role, 'global', `obj${i}`, 'read', i % 2 === 0 ? 'allow' : 'deny'])
  const insertAll = async (role: string, through: (tx: Queryable) => Queryable) => {
    const rules = rulesOf(role)
    for (const i of [3, 400, BULK_AUDIT_ROWS + 9]) await insertRule(db, 'p', rules[i] as string[])
    const list = [...rules, rules[7] as string[], rules[400] as string[], rules[5000] as string[]]
    let copies = 0
    const answer = await db.transaction(async (tx: Queryable) => {
      const q = through(tx)
      const copyFrom = q.copyFrom?.bind(q)
      const counted: Queryable = copyFrom === undefined ? q : { ...q, query: q.query.bind(q), queryArrays: q.queryArrays.bind(q), exec: q.exec.bind(q), copyFrom: (target, lines) => ((copies += 1), copyFrom(target, lines)) }
      return insertRules(counted, 'p', list)
    })
    const { rows } = await db.query<{ v2: string }>('SELECT substr(v0, length($1) + 1) || v1 || v2 || v3 || v4 || v5 AS v2 FROM casbin_rule WHERE left(v0, length($1)) = $1 ORDER BY casbin_rule.id', [role])
    return { answer, copies, stored: rows.map((r) => r.v2), list }
  }
  const copied = await insertAll('copied', (tx) => tx)
  const bound = await insertAll('bound', (tx) => ({ query: tx.query.bind(tx), queryArrays: tx.queryArrays.bind(tx), exec: tx.exec.bind(tx) }))
  t.equal(copied.copies, backend === 'postgres' ? 1 : 0, 'PostgreSQL copies the rules in; PGlite binds them')
  const expected = copied.list.map((_, i) => i < BULK_AUDIT_ROWS + 50 && ![3, 400, BULK_AUDIT_ROWS + 9].includes(i))
  t.same(copied.answer, expected, 'stored already and repeated rules are false, every other one true')
  t.same(bound.answer, expected, 'the same answer without COPY')
  t.equal(copied.stored.length, BULK_AUDIT_ROWS + 50, 'each rule stored once')
  t.same(copied.stored, bound.stored, 'stored in the same order, the list order after the ones stored before')
})
