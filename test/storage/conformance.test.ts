import { randomBytes, randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import type { AuditEntry } from '../../src/domain/audit.js'
import { ChainVerifier } from '../../src/domain/auditChain.js'
import { ruleAdded } from '../../src/domain/changes.js'
import { loginLimits } from '../../src/domain/loginLimits.js'
import type { Account } from '../../src/domain/principals.js'
import * as accounts from '../../src/storage/accounts.js'
import { auditHead, iterateAuditChain, listAudit } from '../../src/storage/audit.js'
import { insertCatalogEntry, listCatalog, updateCatalogEntry } from '../../src/storage/catalog.js'
import { readChangesAfter, readFeedAfter, writeCommitted } from '../../src/storage/changes.js'
import type { Database, Queryable, Row } from '../../src/storage/db.js'
import { admitLoginAttempt, clearLoginFailures, recordLoginSuccess } from '../../src/storage/loginFailures.js'
import { deleteExpiredEndedTokens, insertEndedToken, listEndedTokens } from '../../src/storage/endedTokens.js'
import { insertMerchant, listMerchants, merchantExists } from '../../src/storage/merchants.js'
import { migrate } from '../../src/storage/migrate.js'
import { deleteOverride, iterateOverrides, setOverride, sweepExpiredOverrides } from '../../src/storage/overrides.js'
import { openPostgres } from '../../src/storage/pg.js'
import { openPGlite } from '../../src/storage/pglite.js'
import { deleteRule, deleteRules, insertRule, insertRules, iterateRules } from '../../src/storage/policyRows.js'
import { LOCK_REVISION, currentRevision, lockedRevision } from '../../src/storage/revision.js'
import { ensureSubRole, ensureSubRoles, insertSubRole, listDomainSubRoles, listSubRoles, subRoleKnownIn } from '../../src/storage/subRoles.js'
import { recordWrite, type WriteRecord } from '../../src/storage/writeRecord.js'
import { postgresUrl } from '../helper.js'

/** One write as the write queue records it: the revision row locked with BEGIN, then the audit rows, revision, feed row and items in one record. */
function write(db: Database, record: Partial<Pick<WriteRecord, 'writeId' | 'audit' | 'changes'>>, after?: (tx: Queryable) => Promise<void>): Promise<number> {
  return db.transaction(
    async (tx: Queryable, opened: Row[]) => {
      const { revision, head } = lockedRevision(opened)
      await recordWrite(tx, { revision: revision + 1, head, writeId: record.writeId ?? randomUUID(), audit: record.audit ?? [], changes: record.changes ?? [], items: [], retentionDays: 7 })
      await after?.(tx)
      return revision + 1
    },
    { opening: LOCK_REVISION },
  )
}

/**
 * One suite for the storage functions, run against every back end in one
 * run (as Kysely's tests loop over dialects and OpenFGA's RunAllTests runs
 * one suite per datastore): always an in-memory PGlite, and PostgreSQL too
 * when DATABASE_URL names one. Each back end gets one migrated database;
 * each case makes its own accounts, merchants and rows under fresh names,
 * so no case depends on another's leftovers.
 */

interface Backend {
  name: 'pglite' | 'postgres'
  open(t: Test): Promise<Database>
}

const backends: Backend[] = [
  {
    name: 'pglite',
    async open(t) {
      const db = await openPGlite(null)
      t.teardown(() => db.close())
      return db
    },
  },
]
const url = postgresUrl
if (url !== undefined) {
  backends.push({
    name: 'postgres',
    async open(t) {
      const schema = `conformance_${randomBytes(6).toString('hex')}`
      const admin = openPostgres({ url, max: 1 })
      await admin.query(`CREATE SCHEMA ${schema}`)
      const db = openPostgres({ url, schema })
      t.teardown(async () => {
        await db.close()
        await admin.query(`DROP SCHEMA ${schema} CASCADE`)
        await admin.close()
      })
      return db
    },
  })
}

const unique = (prefix: string): string => `${prefix}${randomBytes(4).toString('hex')}`

async function newAccount(db: Database, fields: Partial<accounts.NewAccount> = {}): Promise<Account> {
  const merchant = fields.merchant_id ?? null
  if (merchant !== null) await insertMerchant(db, merchant)
  await db.query('INSERT INTO sub_roles (code) VALUES ($1) ON CONFLICT DO NOTHING', [fields.sub_role_code ?? 'operator'])
  return accounts.insertAccount(db, {
    id: randomUUID(),
    email: `${unique('a')}@example.com`,
    password_hash: 'hash',
    name: 'Someone',
    phone: null,
    principal_type: merchant === null ? 'system_owner' : 'merchant',
    merchant_id: merchant,
    sub_role_code: 'operator',
    parent_role: null,
    created_by: null,
    ...fields,
  })
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const item of items) out.push(item)
  return out
}

function entry(targetId: string, fields: Partial<AuditEntry> = {}): AuditEntry {
  return {
    action: 'grant',
    target_type: 'role',
    target_id: targetId,
    obj: 'orders',
    act: 'read',
    domain: 'global',
    merchant_id: null,
    actor: { id: 'system', type: 'system', ip: null },
    ...fields,
  }
}

for (const backend of backends) {
  t.test(`storage conformance (${backend.name})`, async (t) => {
    const db = await backend.open(t)
    await migrate(db)

    t.test('accounts: insert, find by id and email (any case), change and count', async (t) => {
      const before = await accounts.countAccounts(db)
      const account = await newAccount(db, { email: `${unique('Mixed')}@Example.com` })
      t.equal(account.status, 'active')
      t.ok(account.created_at instanceof Date, 'created_at comes back as a Date')
      t.same(await accounts.findAccountById(db, account.id), account)
      const byEmail = await accounts.findAccountByEmail(db, account.email.toUpperCase())
      t.equal(byEmail?.id, account.id, 'email is looked up without case')
      t.equal(byEmail?.password_hash, 'hash')
      t.ok(await accounts.emailTaken(db, account.email.toLowerCase()))
      t.notOk(await accounts.emailTaken(db, `${unique('nobody')}@example.com`))
      t.equal(await accounts.countAccounts(db), before + 1)
      t.equal(await accounts.findAccountById(db, randomUUID()), null)

      t.equal(account.credentials_changed_at, null, 'credentials never changed')
      const deactivatedAt = new Date('2030-01-01T00:00:01.250Z')
      const changed = await db.transaction((tx) => accounts.setStatus(tx, account.id, 'deactivated', deactivatedAt))
      t.equal(changed?.status, 'deactivated')
      t.equal(account.must_change_password, false, 'a new account chose its password')
      t.equal(changed?.credentials_changed_at?.getTime(), deactivatedAt.getTime(), 'a status change notes its instant, to the millisecond')
      const changedAgain = new Date('2030-01-01T00:00:02Z')
      const password = await db.transaction((tx) => accounts.setPassword(tx, account.id, 'other', changedAgain, true))
      t.ok((password?.credentials_version ?? 0) > account.credentials_version, 'a new password bumps the credentials version')
      t.equal(password?.credentials_changed_at?.getTime(), changedAgain.getTime(), 'and notes its instant')
      t.equal(password?.must_change_password, true, 'a generated password is marked to be changed')
      const chosen = await db.transaction((tx) => accounts.setPassword(tx, account.id, 'other', changedAgain, false))
      t.equal(chosen?.must_change_password, false, 'a chosen one clears the mark')
      const ended = await db.transaction((tx) => accounts.endAllTokens(tx, account.id, new Date('2030-01-01T00:00:03Z')))
      t.equal(ended?.credentials_version, (chosen?.credentials_version ?? 0) + 1, 'ending every token bumps it too')
      t.equal(ended?.credentials_changed_at?.toISOString(), '2030-01-01T00:00:03.000Z', 'and notes its instant')
      t.equal((await accounts.findAccountWithHash(db, account.id))?.password_hash, 'other')
      await db.query("INSERT INTO sub_roles (code) VALUES ('auditor') ON CONFLICT DO NOTHING")
      const moved = await db.transaction((tx) => accounts.setSubRole(tx, account.id, 'auditor'))
      t.same({ now: moved?.account.sub_role_code, previous: moved?.previous }, { now: 'auditor', previous: 'operator' })
      t.equal(await db.transaction((tx) => accounts.setStatus(tx, randomUUID(), 'active', new Date())), null, 'no row: null')
    })

    t.test('accounts: the list filters, pages and counts; iterate reads them all', async (t) => {
      const merchant = unique('m')
      const made = [
        await newAccount(db, { merchant_id: merchant }),
        await newAccount(db, { merchant_id: merchant }),
        await newAccount(db, { merchant_id: merchant }),
      ]
      const first = await accounts.listAccounts(db, { merchant_id: merchant }, 1, 2)
      t.equal(first.total, 3)
      t.equal(first.items.length, 2)
      const second = await accounts.listAccounts(db, { merchant_id: merchant }, 2, 2)
      t.equal(second.items.length, 1)
      t.same(new Set([...first.items, ...second.items].map((a) => a.id)), new Set(made.map((a) => a.id)), 'the pages hold each account once')
      const all = await collect(accounts.iterateAccounts(db, 2))
      t.equal(all.length, await accounts.countAccounts(db), 'iteration in small pages reads every account')
    })

    t.test('accounts: the system root and the other active roots', async (t) => {
      const root = await newAccount(db, { sub_role_code: 'super_admin' })
      t.ok(await accounts.systemSuperAdminExists(db))
      t.equal(await db.transaction((tx) => accounts.otherActiveSystemRoots(tx, root.id)), 0, 'the only system root has no other')
    })

    t.test('ended tokens: recorded once, listed until they expire, deleted once expired', async (t) => {
      const account = await newAccount(db)
      const now = new Date('2030-01-01T00:00:00Z')
      const [soon, later] = [unique('soon'), unique('later')]
      await db.transaction(async (tx) => {
        await insertEndedToken(tx, soon, account.id, new Date(now.getTime() + 1000))
        await insertEndedToken(tx, soon, account.id, new Date(now.getTime() + 1000))
        await insertEndedToken(tx, later, account.id, new Date(now.getTime() + 60_000))
      })
      const listed = async (at: Date) => {
        const rows = (await listEndedTokens(db, at)).filter((r) => r.jti === soon || r.jti === later)
        return rows.sort((a, b) => a.expiresAt - b.expiresAt)
      }
      t.same(
        await listed(now),
        [
          { accountId: account.id, jti: soon, expiresAt: now.getTime() + 1000 },
          { accountId: account.id, jti: later, expiresAt: now.getTime() + 60_000 },
        ],
        'both, once each, with their account',
      )
      t.same((await listed(new Date(now.getTime() + 1000))).map((r) => r.jti), [later], 'not past its expiry')
      const other = await newAccount(db)
      await db.transaction((tx) => insertEndedToken(tx, later, other.id, new Date(now.getTime() + 60_000)))
      t.same(
        (await listed(now)).filter((r) => r.jti === later).map((r) => r.accountId).sort(),
        [account.id, other.id].sort(),
        "the same jti in another account's token is another row",
      )
      await db.transaction((tx) => deleteExpiredEndedTokens(tx, new Date(now.getTime() + 1000)))
      const { rows } = await db.query<{ jti: string }>('SELECT jti FROM ended_tokens WHERE jti = ANY($1)', [[soon, later]])
      t.same(rows.map((r) => r.jti), [later, later], 'the expired row is deleted, the others kept')
    })

    t.test('merchants: insert once, exists, list by prefix with admin counts', async (t) => {
      const prefix = unique('p_')
      t.ok(await insertMerchant(db, `${prefix}a`))
      t.notOk(await insertMerchant(db, `${prefix}a`), 'a taken id is refused, not an error')
      t.ok(await insertMerchant(db, `${prefix}b`))
      await newAccount(db, { merchant_id: `${prefix}b` })
      t.ok(await merchantExists(db, `${prefix}a`))
      t.notOk(await merchantExists(db, unique('none')))
      const list = await listMerchants(db, prefix, 1, 10)
      t.equal(list.total, 2)
      t.same(
        list.items.map((m) => [m.merchant_id, m.admins]),
        [
          [`${prefix}a`, 0],
          [`${prefix}b`, 1],
        ],
      )
      t.equal((await listMerchants(db, prefix.replace('_', '%'), 1, 10)).total, 0, '% in a prefix is a plain character')
      t.same(list.items.map((m) => m.display_name), [`${prefix}a`, `${prefix}b`], 'named by their ids when no name is given')
      const named = unique('n_')
      t.ok(await insertMerchant(db, named, `Ünïcode Bööks ${named}`))
      t.same((await listMerchants(db, `bööks ${named}`.toUpperCase(), 1, 10)).items.map((m) => [m.merchant_id, m.display_name]), [[named, `Ünïcode Bööks ${named}`]], 'found by part of its name, ignoring case')
    })

    t.test('sub-roles: insert once, exist, list, and the domain view', async (t) => {
      const code = unique('role_')
      const merchant = unique('m')
      const other = unique('m')
      await insertMerchant(db, merchant)
      await insertMerchant(db, other)
      t.ok(await insertSubRole(db, merchant, code, 'A role'))
      t.notOk(await insertSubRole(db, merchant, code, 'Again'), 'a taken code is refused in its domain')
      t.ok(await subRoleKnownIn(db, merchant, code))
      t.notOk(await subRoleKnownIn(db, other, code), 'another merchant does not know it')
      t.notOk(await subRoleKnownIn(db, 'global', code), 'nor does global')
      t.ok((await listSubRoles(db)).some((r) => r.code === code && r.domain === merchant))
      await insertRule(db, 'p', [code, merchant, 'orders', 'read'])
      const view = await listDomainSubRoles(db, merchant, 1, 50)
      t.equal(view.items.find((r) => r.code === code)?.rules, 1, 'its rule in the domain is counted')
      t.ok(view.items.some((r) => r.is_root), 'root is known in every domain')
      t.notOk(
        (await listDomainSubRoles(db, other, 1, 50)).items.some((r) => r.code === code),
        'a role created in one merchant is not listed in another',
      )

      t.ok(await insertSubRole(db, other, code, 'Theirs'), 'the same code in another merchant')
      t.ok(await insertSubRole(db, 'global', code, 'Template'), 'and in global')
      const labels = async (domain: string) => (await listDomainSubRoles(db, domain, 1, 50)).items.find((r) => r.code === code)?.label
      t.same([await labels(merchant), await labels(other), await labels('global'), await labels(unique('m'))], ['A role', 'Theirs', 'Template', 'Template'], "each domain's own label wins over the template's")

      const used = unique('role_')
      await ensureSubRole(db, merchant, used)
      t.ok(await subRoleKnownIn(db, merchant, used), 'first use creates it where it is used')
      t.notOk(await subRoleKnownIn(db, other, used))
      await ensureSubRole(db, other, code)
      t.equal((await listSubRoles(db)).filter((r) => r.code === code).length, 3, 'first use of a code known there makes no row')
    })

    t.test('policy rows: insert once, delete, iterate by domain', async (t) => {
      const domain = unique('d')
      const rule = ['operator', domain, 'orders', 'read']
      t.ok(await insertRule(db, 'p', rule))
      t.notOk(await insertRule(db, 'p', rule), 'a duplicate rule is not inserted twice')
      t.ok(await insertRule(db, 'g', ['someone', 'operator', domain]))
      const rows = await collect(iterateRules(db, { domain, pageSize: 1 }))
      t.same(
        rows.filter((r) => r.fields.includes(domain)),
        [
          { ptype: 'p', fields: rule },
          { ptype: 'g', fields: ['someone', 'operator', domain] },
        ],
      )
      const other = await collect(iterateRules(db, { domain: unique('d') }))
      t.notOk(
        other.some((r) => r.fields.includes(domain)),
        'another domain does not see them',
      )
      t.ok(await deleteRule(db, 'p', rule))
      t.notOk(await deleteRule(db, 'p', rule), 'deleting twice finds nothing')
    })

    t.test('overrides: set, replace, delete, expire and sweep', async (t) => {
      const user = await newAccount(db)
      const domain = unique('d')
      const key = { user_id: user.id, domain, obj: 'orders', act: 'read' }
      const now = new Date()
      t.same(await db.transaction((tx) => setOverride(tx, { ...key, effect: 'allow' }, 'system', now)), { previous: null, expired: null })
      const second = await db.transaction((tx) => setOverride(tx, { ...key, effect: 'deny' }, 'system', now))
      t.equal(second.previous?.effect, 'allow', 'the replaced override is returned')
      const stored = (await collect(iterateOverrides(db, { domain }))).filter((o) => o.user_id === user.id)
      t.same(
        stored.map((o) => [o.effect, o.expires_at]),
        [['deny', null]],
      )
      t.equal((await db.transaction((tx) => deleteOverride(tx, key, now))).previous?.effect, 'deny')

      const soon = new Date(now.getTime() + 1000)
      await db.transaction((tx) => setOverride(tx, { ...key, effect: 'allow', expires_at: soon }, 'system', now))
      const later = await db.transaction((tx) => setOverride(tx, { ...key, effect: 'deny' }, 'system', new Date(now.getTime() + 2000)))
      t.equal(later.previous, null, 'an expired override is not in force')
      t.equal(later.expired?.effect, 'allow', 'and is reported as removed for having expired')

      const at = new Date(now.getTime() + 5000)
      await db.transaction((tx) => setOverride(tx, { ...key, obj: 'invoices', effect: 'allow', expires_at: at }, 'system', now))
      const swept = await db.transaction((tx) => sweepExpiredOverrides(tx, new Date(at.getTime() + 1)))
      t.same(
        swept.filter((o) => o.user_id === user.id).map((o) => [o.obj, o.effect, o.expires_at.getTime(), o.merchant_id]),
        [['invoices', 'allow', at.getTime(), null]],
      )
      const left = await collect(iterateOverrides(db, { domain, pageSize: 1 }))
      t.same(
        left.filter((o) => o.user_id === user.id).map((o) => o.obj),
        ['orders'],
        'the sweep removed only the expired one',
      )
    })

    t.test('catalog: insert, update, list (the scope is the code\'s)', async (t) => {
      const obj = unique('obj_')
      await db.transaction((tx) => insertCatalogEntry(tx, { obj, act: 'read', label: 'Read', group_name: 'g' }))
      t.same((await listCatalog(db)).find((e) => e.obj === obj), { obj, act: 'read', label: 'Read', group_name: 'g', is_active: true, scope: 'any' })
      await db.transaction((tx) => updateCatalogEntry(tx, { obj, act: 'read', label: 'Look', group_name: 'h', is_active: false }))
      t.same((await listCatalog(db)).find((e) => e.obj === obj), { obj, act: 'read', label: 'Look', group_name: 'h', is_active: false, scope: 'any' })
      const onboard = { obj: 'merchant', act: 'onboard' }
      if (!(await listCatalog(db)).some((e) => e.obj === onboard.obj && e.act === onboard.act)) {
        await db.transaction((tx) => insertCatalogEntry(tx, { ...onboard, label: 'Onboard', group_name: 'g' }))
      }
      t.equal((await listCatalog(db)).find((e) => e.obj === onboard.obj && e.act === onboard.act)?.scope, 'platform', 'a pair the code declares platform')
    })

    t.test('revision and change feed: bump, record, read after, committed write', async (t) => {
      const start = await currentRevision(db)
      const writeId = randomUUID()
      const change = ruleAdded('p', ['operator', 'global', 'orders', 'read'])
      const revision = await write(db, { writeId, changes: [change] })
      t.equal(revision, start + 1)
      t.equal(await currentRevision(db), revision)
      t.same(await readChangesAfter(db, start), [{ revision, changes: [change] }])
      t.same(await readChangesAfter(db, revision), [])
      t.same(await readFeedAfter(db, start, 10), { head: revision, rows: [{ revision, changes: [change] }] }, 'the head and the feed after a revision, read together')
      t.same(await readFeedAfter(db, revision, 10), { head: revision, rows: [] }, 'nothing after the head')
      t.same(await readFeedAfter(db, start - 1, 10), { head: revision, rows: null }, 'behind, with the next revision not in the feed: null (load everything again)')
      t.equal(await writeCommitted(db, writeId), revision)
      t.equal(await writeCommitted(db, randomUUID()), null)
      await t.rejects(
        write(db, {}, async () => {
          throw new Error('rolled back')
        }),
      )
      t.equal(await currentRevision(db), revision, 'a rolled-back write leaves the revision')
    })

    t.test('audit: entries chain, list newest first with filters, the head follows', async (t) => {
      const target = unique('t')
      for (const act of ['read', 'write', 'delete']) {
        await write(db, { audit: [entry(target, { act, actor: { id: 'system', type: 'system', ip: act === 'read' ? '192.0.2.1' : null } })] })
      }
      const list = await listAudit(db, { target_id: target }, 1, 2)
      t.equal(list.total, 3)
      t.same(
        list.items.map((i) => i.act),
        ['delete', 'write'],
        'newest first',
      )
      const rest = await listAudit(db, { target_id: target }, 2, 2)
      t.same(
        rest.items.map((i) => [i.act, i.ip]),
        [['read', '192.0.2.1']],
      )
      const verifier = new ChainVerifier()
      for await (const row of iterateAuditChain(db, 2)) t.equal(verifier.push(row), null, `row ${row.id} chains`)
      t.equal(verifier.finish(await auditHead(db)), null, 'the head is the last row')
    })

    t.test('audit in many rows: one chain, ids ascending, the head moved once', async (t) => {
      const target = unique('m')
      const many = ['a', 'b', 'c', 'd'].map((act) => entry(target, { act, actor: { id: 'system', type: 'system', ip: act === 'b' ? '192.0.2.2' : null } }))
      await write(db, { audit: [entry(target, { act: 'first' }), ...many, entry(target, { act: 'last' })] })
      const list = await listAudit(db, { target_id: target }, 1, 10)
      t.same(list.items.map((i) => [i.act, i.ip]).reverse(), [['first', null], ['a', null], ['b', '192.0.2.2'], ['c', null], ['d', null], ['last', null]], 'in order, ids ascending')
      const verifier = new ChainVerifier()
      for await (const row of iterateAuditChain(db, 3)) t.equal(verifier.push(row), null, `row ${row.id} chains`)
      t.equal(verifier.finish(await auditHead(db)), null, 'the head is the last row')
    })

    t.test('policy rows in many rows: inserted and deleted in one statement each, each reported', async (t) => {
      const role = unique('r')
      const rule = (act: string) => [role, 'global', 'orders', act, 'allow']
      await insertRule(db, 'p', rule('read'))
      t.same(await insertRules(db, 'p', [rule('read'), rule('write'), rule('delete'), rule('write')]), [false, true, true, false], 'stored already, new, new, repeated')
      t.same(await insertRules(db, 'p', []), [])
      t.same(await deleteRules(db, 'p', [rule('write'), rule('cancel'), rule('read')]), [true, false, true])
      const left = []
      for await (const r of iterateRules(db)) if (r.fields[0] === role) left.push(r.fields[3])
      t.same(left, ['delete'])
      await ensureSubRoles(db, [
        { domain: 'global', code: role },
        { domain: 'global', code: role },
        { domain: 'global', code: `${role}_b` },
      ])
      const codes = (await listSubRoles(db)).filter((r) => r.code.startsWith(role)).map((r) => `${r.domain}/${r.code}`)
      t.same(codes.sort(), [`global/${role}`, `global/${role}_b`], 'each sub-role made once')
    })

    t.test('login failures: counted per address and /64, a success forgets its attempt, a clear forgets all', async (t) => {
      const limits = loginLimits(2)
      const email = `${unique('l')}@example.com`
      const one = await admitLoginAttempt(db, email, '192.0.2.10', limits)
      const two = await admitLoginAttempt(db, email.toUpperCase(), '192.0.2.10', limits)
      t.ok(one.admitted && two.admitted, 'two attempts from one address are admitted (the e-mail without case)')
      t.equal((await admitLoginAttempt(db, email, '192.0.2.10', limits)).admitted, false, 'the third from that address is refused')
      t.ok((await admitLoginAttempt(db, email, '2001:db8::1', limits)).admitted, 'another address is counted apart')
      const sameNetwork = await admitLoginAttempt(db, email, '2001:db8::2', limits)
      t.ok(sameNetwork.admitted, 'a second from the same IPv6 /64 is admitted')
      t.equal((await admitLoginAttempt(db, email, '2001:db8::3', limits)).admitted, false, 'the third from that /64 is refused')
      if (sameNetwork.admitted) await recordLoginSuccess(db, sameNetwork.id, email, '2001:db8::2')
      t.ok((await admitLoginAttempt(db, email, '2001:db8::4', limits)).admitted, 'a success forgets its own attempt')
      await clearLoginFailures(db, email)
      t.ok((await admitLoginAttempt(db, email, '192.0.2.10', limits)).admitted, 'after a clear the address is admitted again')
    })
  })
}
