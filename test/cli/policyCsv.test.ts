/**
 * The policy as a Casbin CSV file: export, import and the round trip
 * between them, on PGlite and on PostgreSQL.
 *
 *   - export, wipe the policy, import: every decision of every user, domain
 *     and catalog pair is what it was, in one write with one audit entry per
 *     change (actor system);
 *   - the exported file, loaded by node-casbin's own FileAdapter with
 *     model.conf, decides exactly as Casbin over the stored policy;
 *   - a file that breaks a rule is refused naming the line, and nothing
 *     changes; --dry-run prints the difference and writes nothing;
 *   - the command line's output and exit codes, in process and as a child process.
 */
import { execFile } from 'node:child_process'
import { truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { FileAdapter, newEnforcer } from 'casbin'
import t, { type Test } from 'tap'
import type { Caller } from '../../src/commands/context.js'
import { grantRolePermission } from '../../src/commands/changeRolePermission.js'
import { exportPolicy } from '../../src/commands/exportPolicy.js'
import { MAX_POLICY_FILE_BYTES, importPolicy } from '../../src/commands/importPolicy.js'
import { parsePolicyCsv } from '../../src/domain/policyCsv.js'
import { describeDiff, summarizeDiff } from '../../src/domain/policyDiff.js'
import { PolicyFileError } from '../../src/domain/policyImport.js'
import { syncCatalog } from '../../src/commands/syncCatalog.js'
import type { Service } from '../../src/compose.js'
import { declaredCatalog } from '../../src/domain/permissions.js'
import { GLOBAL_DOMAIN, type Account } from '../../src/domain/principals.js'
import type { Database, Queryable } from '../../src/storage/db.js'
import { setOverride, type Effect } from '../../src/storage/overrides.js'
import { insertRule } from '../../src/storage/policyRows.js'
import {
  TEST_SECRET,
  backend,
  buildTestApp,
  freshDatabase,
  onboard,
  register,
  secondConnection,
  tempDir,
  type TestApp,
} from '../helper.js'
import { cliOn } from '../support/cli.js'
import { eventually } from '../support/eventually.js'
import { pgliteRunOnly } from '../support/onceOnPGlite.js'
import { TEST_NODE_ARGS } from '../support/nodeArgs.js'

const MODEL = new URL('../../model.conf', import.meta.url).pathname
const INACTIVE = { obj: 'customers', act: 'export' }
const rootCaller = (ta: TestApp): Caller => ({ account: ta.root, ip: null })

interface World {
  ta: TestApp
  service: Service
  users: Account[]
  byName: Record<string, Account>
  domains: string[]
}

/** An override written through the store, as a replica would find it; the engine is reloaded by the caller. */
async function storeOverride(db: Queryable, user: Account, domain: string, obj: string, act: string, effect: Effect, expiresAt: Date | null = null): Promise<void> {
  await setOverride(db, { user_id: user.id, domain, obj, act, effect, expires_at: expiresAt }, 'test')
}

/**
 * Two merchants, system-owner and merchant users of several sub-roles, role
 * grants in global and in merchants, a role deny, allow and deny overrides,
 * and rules of a pair that is then deactivated in the catalog.
 */
async function buildWorld(t: Test, options: { inactivePair: boolean; db?: Database }): Promise<World> {
  const ta = await buildTestApp(t, options.db !== undefined ? { db: options.db } : {})
  const { service } = ta
  const owners = [await onboard(ta, 'm-1'), await onboard(ta, 'm-2')]
  const byName: Record<string, Account> = {
    ops: await register(ta, { email: 'ops@platform.example', sub_role_code: 'ops' }),
    auditor: await register(ta, { email: 'auditor@platform.example', sub_role_code: 'auditor' }),
    clerkA: await register(ta, { email: 'a@m-1.example', sub_role_code: 'clerk', merchant_id: 'm-1' }),
    clerkB: await register(ta, { email: 'b@m-1.example', sub_role_code: 'clerk', merchant_id: 'm-1' }),
    supervisor: await register(ta, { email: 's@m-1.example', sub_role_code: 'supervisor', merchant_id: 'm-1' }),
    clerkC: await register(ta, { email: 'c@m-2.example', sub_role_code: 'clerk', merchant_id: 'm-2' }),
  }
  const grants: Array<[string, string, string, string]> = [
    ['ops', GLOBAL_DOMAIN, 'orders', 'read'],
    ['ops', GLOBAL_DOMAIN, 'payouts', 'read'],
    ['ops', GLOBAL_DOMAIN, 'customers', 'read'],
    ['auditor', GLOBAL_DOMAIN, 'reports', 'read'],
    ['clerk', GLOBAL_DOMAIN, 'orders', 'read'],
    ['clerk', 'm-1', 'orders', 'refund'],
    ['clerk', 'm-1', INACTIVE.obj, INACTIVE.act],
    ['supervisor', 'm-1', 'orders', 'cancel'],
    ['supervisor', 'm-1', 'payouts', 'approve'],
    ['clerk', 'm-2', 'products', 'write'],
  ]
  for (const [role, domain, obj, act] of grants) await grantRolePermission(service, rootCaller(ta), role, { obj, act, domain })
  // A role's deny: the model and casbin_rule hold them, the API makes none.
  await insertRule(service.db, 'p', ['clerk', 'm-2', 'orders', 'read', 'deny'])
  const u = byName as Record<'ops' | 'auditor' | 'clerkA' | 'clerkB' | 'supervisor' | 'clerkC', Account>
  await storeOverride(service.db, u.clerkA, 'm-1', 'orders', 'refund', 'deny')
  await storeOverride(service.db, u.clerkB, 'm-1', 'payouts', 'approve', 'allow')
  await storeOverride(service.db, u.clerkB, 'm-1', INACTIVE.obj, INACTIVE.act, 'allow')
  await storeOverride(service.db, u.ops, 'm-2', 'settings', 'manage', 'allow')
  await storeOverride(service.db, u.ops, GLOBAL_DOMAIN, 'payouts', 'read', 'deny')
  await storeOverride(service.db, u.auditor, 'm-1', 'orders', 'cancel', 'allow')
  await service.reload()
  if (options.inactivePair) {
    await syncCatalog(service, declaredCatalog().filter((p) => !(p.obj === INACTIVE.obj && p.act === INACTIVE.act)))
  }
  return { ta, service, users: [ta.root, ...owners, ...Object.values(byName)], byName, domains: [GLOBAL_DOMAIN, 'm-1', 'm-2'] }
}

/** Every decision of the engine: user × domain × catalog pair (active or not). */
function decisions(w: World): Map<string, boolean> {
  const answers = new Map<string, boolean>()
  for (const user of w.users) {
    for (const domain of w.domains) {
      for (const { obj, act } of w.service.engine.catalogEntries()) answers.set([user.email, domain, obj, act].join(' '), w.service.engine.decide(user, domain, obj, act))
    }
  }
  return answers
}

const differing = (a: Map<string, boolean>, b: Map<string, boolean>) => [...a].filter(([k, v]) => b.get(k) !== v).map(([k]) => k)

interface Fingerprint {
  rules: unknown[]
  overrides: unknown[]
  audit: number
  revision: string
  changes: number
}

/** Everything an import may write. */
async function fingerprint(db: Queryable): Promise<Fingerprint> {
  const rows = async (sql: string) => (await db.query(sql)).rows
  const one = async (sql: string) => String(Object.values((await db.query(sql)).rows[0] ?? {})[0])
  return {
    rules: await rows('SELECT ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule ORDER BY ptype, v0, v1, v2, v3, v4, v5'),
    overrides: await rows('SELECT user_id::text AS user_id, domain, obj, act, effect FROM permission_overrides ORDER BY 1, 2, 3, 4'),
    audit: Number(await one('SELECT count(*) FROM permission_audit')),
    revision: await one('SELECT revision::text FROM store_revision'),
    changes: Number(await one('SELECT count(*) FROM store_changes')),
  }
}

async function refusal(promise: Promise<unknown>): Promise<PolicyFileError> {
  try {
    await promise
  } catch (error) {
    if (error instanceof PolicyFileError) return error
    throw error
  }
  throw new Error('the import was not refused')
}

const linesOf = (csv: string) => csv.split('\n').filter((l) => l !== '')
/** The p and g lines of a file, without its comments. */
const rulesOf = (csv: string) => linesOf(csv).filter((l) => !l.startsWith('#'))
const HEADER_ALL = '# policy-format: 1\n# scope: all\n'
const headerOf = (domain: string) => `# policy-format: 1\n# scope: domain ${domain}\n`

t.test(`export, wipe, import: the same decisions everywhere, and Casbin's file adapter agrees (${backend})`, async (t) => {
  const w = await buildWorld(t, { inactivePair: true })
  const { service } = w
  // An override that expires: its line comes after its `# expires_at` comment, which Casbin skips.
  const expiresAt = new Date(Date.UTC(2099, 0, 31, 18))
  const clerkC = w.byName.clerkC as Account
  await storeOverride(service.db, clerkC, 'm-2', 'payouts', 'read', 'allow', expiresAt)
  await service.reload()
  const before = decisions(w)

  const exported = await exportPolicy(service)
  const lines = rulesOf(exported.csv)
  t.ok(exported.csv.startsWith(HEADER_ALL), 'the header names the format and the scope')
  t.ok(
    exported.csv.includes(`\n# expires_at 2099-01-31T18:00:00.000Z\np, ${clerkC.id}, m-2, payouts, read, allow\n`),
    "an expiring override's instant on the comment line before it",
  )
  t.equal(linesOf(exported.csv).length, lines.length + 3, 'no other comment')
  t.equal(exported.leftOut, 2, "the inactive pair's role rule and override are left out")
  t.notOk(lines.some((l) => l.includes(`${INACTIVE.obj}, ${INACTIVE.act}`)), 'no line names the inactive pair')
  t.equal((await exportPolicy(service)).csv, exported.csv, 'the same store exports the same bytes')
  t.same(lines, [...lines].sort((a, b) => (a.startsWith('g') === b.startsWith('g') ? 0 : a.startsWith('g') ? 1 : -1)), 'p lines, then g lines')
  t.ok(lines.every((l) => /^(p(, [^,"\s]+){5}|g(, [^,"\s]+){3})$/.test(l)), 'fields separated by ", ", nothing quoted')
  t.ok(lines.includes(`g, ${w.byName.clerkA?.id ?? ''}, clerk, m-1`), "a merchant user's assignment")
  t.ok(lines.includes(`g, ${w.ta.root.id}, super_admin, global`), "the root's assignment")
  t.ok(lines.includes(`p, ${w.byName.ops?.id ?? ''}, global, payouts, read, deny`), 'a deny override as a p line of its user')
  t.ok(lines.includes('p, clerk, m-2, orders, read, deny'), "a role's deny")
  t.equal(exported.rules, lines.length)

  const same = await importPolicy(service, exported.csv)
  t.equal(summarizeDiff(same.diff), 'no change: the store already holds this policy', 'importing what was exported changes nothing')
  t.notOk(same.applied)

  // Wipe the policy: every role rule and override, through the store.
  await service.db.query("DELETE FROM casbin_rule WHERE ptype = 'p'")
  await service.db.query('DELETE FROM permission_overrides')
  await service.reload()
  t.ok(differing(before, decisions(w)).length > 10, 'the wipe changed decisions')

  const start = await fingerprint(service.db)
  const imported = await importPolicy(service, exported.csv)
  const end = await fingerprint(service.db)
  const pLines = lines.filter((l) => l.startsWith('p'))
  t.equal(imported.diff.added.length, pLines.length, 'every p line added')
  t.same([imported.diff.removed, imported.diff.changed], [[], []])
  t.ok(imported.applied)
  t.equal(Number(end.revision), Number(start.revision) + 1, 'one revision')
  t.equal(imported.revision, Number(end.revision))
  t.equal(end.audit - start.audit, pLines.length, 'one audit entry per change')
  t.equal(end.changes - start.changes, 1, 'one change-feed row')
  const audit = await service.db.query<{ action: string; target_type: string; actor_id: string; actor_type: string }>(
    'SELECT action, target_type, actor_id, actor_type FROM permission_audit ORDER BY id DESC LIMIT $1',
    [pLines.length],
  )
  t.ok(audit.rows.every((r) => r.actor_id === 'system' && r.actor_type === 'system'), 'actor system')
  const actions = (type: string, action: string) => audit.rows.filter((r) => r.target_type === type && r.action === action).length
  t.same(
    { roleGrant: actions('role', 'grant'), roleDeny: actions('role', 'deny'), userGrant: actions('user', 'grant'), userDeny: actions('user', 'deny') },
    { roleGrant: 9, roleDeny: 1, userGrant: 4, userDeny: 2 },
  )
  const restored = await service.db.query<{ expires_at: Date | null }>(
    "SELECT expires_at FROM permission_overrides WHERE user_id = $1 AND domain = 'm-2' AND obj = 'payouts' AND act = 'read'",
    [clerkC.id],
  )
  t.equal(restored.rows[0]?.expires_at?.getTime(), expiresAt.getTime(), 'the override comes back with its expiry')

  t.same(differing(before, decisions(w)), [], 'in memory, every decision is what it was')
  await service.reload()
  t.same(differing(before, decisions(w)), [], 'and after a reload from the store')
  t.equal((await exportPolicy(service)).csv, exported.csv, 'the store exports the same file again')

  // node-casbin's own file adapter, with model.conf, on the exported file.
  const file = join(tempDir(t), 'policy.csv')
  writeFileSync(file, exported.csv)
  const casbin = await newEnforcer(MODEL, new FileAdapter(file))
  t.equal((await casbin.getPolicy()).length, pLines.length, 'the file adapter loads every p line')
  t.equal((await casbin.getGroupingPolicy()).length, lines.length - pLines.length, 'and every g line')
  let compared = 0
  let outsideRules = 0
  const mismatches: string[] = []
  for (const user of w.users) {
    for (const domain of w.domains) {
      for (const { obj, act, is_active } of service.engine.catalogEntries()) {
        const fromFile = await casbin.enforce(user.id, domain, obj, act)
        compared++
        // Casbin over the stored policy: the store now holds exactly the file's rules.
        if (fromFile !== service.engine.enforce(user.id, domain, obj, act)) mismatches.push(`enforce ${user.email} ${domain} ${obj}:${act}`)
        // Where the engine's root, tenant and catalog rules do not apply, its decision is Casbin's.
        const ruled = service.engine.isRootRole(user.sub_role_code) || !is_active || (user.principal_type === 'merchant' && user.merchant_id !== domain)
        if (ruled) continue
        outsideRules++
        if (fromFile !== service.engine.decide(user, domain, obj, act)) mismatches.push(`decide ${user.email} ${domain} ${obj}:${act}`)
      }
    }
  }
  t.same(mismatches, [], `${compared} requests to the file adapter, ${outsideRules} of them also against decide()`)
  t.ok(outsideRules > 100)

  t.test('--domain: what decides in one merchant, and nothing else', async (t) => {
    const m1 = await exportPolicy(service, { domain: 'm-1' })
    t.ok(m1.csv.startsWith(headerOf('m-1')), 'the header names the domain')
    const m1Lines = rulesOf(m1.csv)
    t.ok(
      m1Lines.every((l) => {
        const f = l.split(', ')
        return (f[0] === 'p' ? f[2] : f[3]) === 'm-1' || (f[0] === 'p' ? f[2] : f[3]) === GLOBAL_DOMAIN
      }),
      'only m-1 and global rows',
    )
    t.same(
      m1Lines,
      lines.filter((l) => !l.includes(', m-2')),
      "the full export's lines of m-1 and global",
    )
    const path = join(tempDir(t), 'm-1.csv')
    writeFileSync(path, m1.csv)
    const filtered = await newEnforcer(MODEL, new FileAdapter(path))
    const wrong: string[] = []
    for (const user of w.users) {
      for (const { obj, act } of service.engine.catalogEntries()) {
        if ((await filtered.enforce(user.id, 'm-1', obj, act)) !== service.engine.enforce(user.id, 'm-1', obj, act)) wrong.push(`${user.email} ${obj}:${act}`)
      }
    }
    t.same(wrong, [], 'in m-1 the filtered file decides as the whole policy')
    await t.rejects(exportPolicy(service, { domain: 'm-404' }), { code: 'MERCHANT_NOT_FOUND' })
  })
})

t.test(`a file that breaks a rule is refused naming its line, and nothing changes (${backend})`, async (t) => {
  const w = await buildWorld(t, { inactivePair: true })
  const { service } = w
  const u = w.byName as Record<'ops' | 'clerkA' | 'clerkB' | 'clerkC', Account>
  const base = (await exportPolicy(service)).csv
  // A valid change as well, which must not be applied either.
  const edited = base.replace('p, clerk, m-1, orders, refund, allow\n', '') + 'p, clerk, m-1, orders, cancel, allow\n'
  const lastLine = linesOf(edited).length + 1
  const body = base.slice(HEADER_ALL.length)
  const cases: Array<[string, string, RegExp, string?]> = [
    ['a grant to super_admin', 'p, super_admin, global, orders, read, allow', /super_admin is a root sub-role/],
    ["an override of a merchant's root user", `p, ${w.users[1]?.id ?? ''}, m-1, orders, read, allow`, /has the root sub-role super_admin/],
    ["a merchant user's override outside its merchant", `p, ${u.clerkA.id}, m-2, orders, read, allow`, /belongs to merchant m-1: its overrides must be in m-1, not m-2/],
    ["a merchant user's override in global", `p, ${u.clerkA.id}, global, orders, read, deny`, /belongs to merchant m-1/],
    ['an unknown domain', 'p, clerk, m-404, orders, read, allow', /unknown domain "m-404"/],
    ['a pair outside the catalog', 'p, clerk, m-1, orders, nuke, allow', /orders:nuke is not active in the catalog/],
    ['a pair deactivated in the catalog', `p, clerk, m-1, ${INACTIVE.obj}, ${INACTIVE.act}, allow`, /customers:export is not active in the catalog/],
    ['a platform pair granted in a merchant domain', 'p, clerk, m-1, merchant, onboard, allow', /merchant:onboard is for system-owner users only/],
    ['a platform pair denied in a merchant domain', 'p, clerk, m-1, merchant, onboard, deny', /merchant:onboard is for system-owner users only/],
    ["a platform pair as a merchant user's override", `p, ${u.clerkA.id}, m-1, merchant, onboard, allow`, /merchant:onboard is for system-owner users only/],
    ["a platform pair as a system-owner user's override in a merchant", `p, ${u.ops.id}, m-1, merchant, onboard, allow`, /merchant:onboard is for system-owner users only/],
    ['a user that does not exist', 'p, 00000000-0000-4000-8000-000000000000, m-1, orders, read, allow', /no user 00000000-0000-4000-8000-000000000000/],
    ['a user id in capitals', `p, ${u.clerkC.id.toUpperCase()}, m-2, orders, read, allow`, /lower case/],
    ['a subject that is neither', 'p, Clerk-1, m-1, orders, read, allow', /must be a sub-role code/],
    ['a sub-role change', `g, ${u.clerkA.id}, supervisor, m-1`, new RegExp(`stored assignment of user ${u.clerkA.id} \\("g, ${u.clerkA.id}, clerk, m-1"\\)`)],
    ['an assignment nobody holds', 'g, clerk, supervisor, m-1', /not a stored assignment/],
    ['a g line of a user that does not exist', 'g, 00000000-0000-4000-8000-000000000000, clerk, m-1', /no user/],
    ['a second override of the same pair', `p, ${u.clerkA.id}, m-1, orders, refund, allow`, /conflicts with line \d+/],
    ['a repeated line', 'p, clerk, global, orders, read, allow', /repeats line \d+/],
    ['a short line', 'p, clerk, m-1, orders', /expected p, <sub-role or user id>/],
    ['another effect', 'p, clerk, m-1, orders, read, maybe', /the effect must be allow or deny/],
    ['another section', 'p2, clerk, m-1, orders, read, allow', /starts with p or g, not "p2"/],
  ]
  for (const [name, line, reason] of cases) {
    const before = await fingerprint(service.db)
    const error = await refusal(importPolicy(service, `${edited}${line}\n`))
    t.same(error.problems.map((p) => p.line), [lastLine], `${name}: the line is named`)
    t.match(error.problems[0]?.reason, reason, `${name}: ${error.problems[0]?.reason ?? ''}`)
    t.same(await fingerprint(service.db), before, `${name}: nothing changed (policy, audit, revision, feed)`)
  }

  const platform = await importPolicy(service, `${edited}p, clerk, global, merchant, onboard, allow\np, ${u.ops.id}, global, merchant, onboard, deny\n`, { dryRun: true })
  t.equal(platform.diff.added.length, 3, 'a platform pair in global, to a role or a system-owner user, is imported')

  const many = await refusal(importPolicy(service, `${HEADER_ALL}p, super_admin, global, orders, read, allow\n${body}p, clerk, m-404, orders, read, allow\n`))
  t.same(many.problems.map((p) => p.line), [3, linesOf(base).length + 2], 'every bad line is named, in order')
  t.equal(many.total, 2)

  // A platform pair's row in a merchant stored before the rule: it counts for nobody, and the file it is exported in still imports.
  await insertRule(service.db, 'p', ['clerk', 'm-1', 'merchant', 'onboard', 'allow'])
  const withOld = (await exportPolicy(service)).csv
  t.match(withOld, /^p, clerk, m-1, merchant, onboard, allow$/m, 'the old row is exported')
  t.same((await importPolicy(service, withOld, { dryRun: true })).diff, { added: [], removed: [], changed: [] }, 'and imported back as it is')

  t.test('--domain: other merchants are out of reach, global is context', async (t) => {
    const before = await fingerprint(service.db)
    const m1 = (await exportPolicy(service, { domain: 'm-1' })).csv
    const outside = await refusal(importPolicy(service, `${m1}p, clerk, m-2, orders, read, allow\n`, { domain: 'm-1' }))
    t.match(outside.problems[0]?.reason, /outside --domain m-1/)
    const global = await refusal(importPolicy(service, `${m1}p, clerk, global, reports, read, allow\n`, { domain: 'm-1' }))
    t.match(global.problems[0]?.reason, /global lines must be as stored/)
    await t.rejects(importPolicy(service, m1, { domain: 'm-404' }), { code: 'MERCHANT_NOT_FOUND' })
    t.same(await fingerprint(service.db), before, 'nothing changed')
  })
})

t.test(`--dry-run prints the difference and writes nothing; the import then applies exactly it (${backend})`, async (t) => {
  const w = await buildWorld(t, { inactivePair: true })
  const { service } = w
  const u = w.byName as Record<'clerkA' | 'clerkB' | 'clerkC' | 'ops', Account>
  // An override that expires tomorrow: its line carries no expiry, and an import that keeps the line keeps the expiry.
  const tomorrow = new Date(Date.now() + 86_400_000)
  await storeOverride(service.db, u.clerkB, 'm-1', 'orders', 'cancel', 'allow', tomorrow)
  await service.reload()
  const base = (await exportPolicy(service)).csv
  t.ok(base.includes(`p, ${u.clerkB.id}, m-1, orders, cancel, allow\n`), 'an override that expires is exported while it counts')
  const edited =
    base
      .replace('p, clerk, m-1, orders, refund, allow\n', '')
      .replace(`p, ${u.clerkA.id}, m-1, orders, refund, deny\n`, `p, ${u.clerkA.id}, m-1, orders, refund, allow\n`)
      .replace(`p, ${u.ops.id}, m-2, settings, manage, allow\n`, '') + `p, clerk, m-2, orders, cancel, allow\np, ${u.clerkC.id}, m-2, payouts, read, deny\n`
  const expected = [
    '- p, clerk, m-1, orders, refund, allow',
    `- p, ${u.clerkA.id}, m-1, orders, refund, deny`,
    `+ p, ${u.clerkA.id}, m-1, orders, refund, allow`,
    '+ p, clerk, m-2, orders, cancel, allow',
    // Users in a domain come in the order of their ids.
    ...[`- p, ${u.ops.id}, m-2, settings, manage, allow`, `+ p, ${u.clerkC.id}, m-2, payouts, read, deny`].sort((x, y) => (x.slice(2) < y.slice(2) ? -1 : 1)),
  ]

  const before = await fingerprint(service.db)
  const dry = await importPolicy(service, edited, { dryRun: true })
  t.same(describeDiff(dry.diff), expected, 'the difference, in file order')
  t.equal(summarizeDiff(dry.diff), '5 changes: 2 added, 2 removed, 1 override changes effect or expiry')
  t.equal(dry.refusal, null)
  t.notOk(dry.applied)
  t.equal(dry.revision, Number(before.revision))
  t.same(await fingerprint(service.db), before, 'nothing written')

  const applied = await importPolicy(service, edited)
  t.same(describeDiff(applied.diff), expected, 'the same difference applied')
  const after = await fingerprint(service.db)
  t.equal(Number(after.revision), Number(before.revision) + 1, 'one revision')
  t.equal(after.audit - before.audit, 5, 'one audit entry per change')
  const audit = await service.db.query<Record<string, string | null>>(
    'SELECT action, target_type, target_id, obj, act, domain, merchant_id, actor_id FROM permission_audit ORDER BY id DESC LIMIT 5',
  )
  t.same(
    new Set(audit.rows.map((r) => JSON.stringify(r))),
    new Set(
      [
        { action: 'revoke', target_type: 'role', target_id: 'clerk', obj: 'orders', act: 'refund', domain: 'm-1', merchant_id: 'm-1', actor_id: 'system' },
        { action: 'revoke', target_type: 'user', target_id: u.ops.id, obj: 'settings', act: 'manage', domain: 'm-2', merchant_id: null, actor_id: 'system' },
        { action: 'grant', target_type: 'role', target_id: 'clerk', obj: 'orders', act: 'cancel', domain: 'm-2', merchant_id: 'm-2', actor_id: 'system' },
        { action: 'deny', target_type: 'user', target_id: u.clerkC.id, obj: 'payouts', act: 'read', domain: 'm-2', merchant_id: 'm-2', actor_id: 'system' },
        { action: 'grant', target_type: 'user', target_id: u.clerkA.id, obj: 'orders', act: 'refund', domain: 'm-1', merchant_id: 'm-1', actor_id: 'system' },
      ].map((r) => JSON.stringify(r)),
    ),
    'each change audited as grant, deny or revoke of its role or user',
  )
  const overrides = await service.db.query(
    "SELECT effect FROM permission_overrides WHERE user_id = $1 AND domain = 'm-1' AND obj = 'orders' AND act = 'refund'",
    [u.clerkA.id],
  )
  t.same(overrides.rows, [{ effect: 'allow' }], "the override's effect changed in place")
  const expiring = await service.db.query<{ expires_at: Date }>(
    "SELECT expires_at FROM permission_overrides WHERE user_id = $1 AND domain = 'm-1' AND obj = 'orders' AND act = 'cancel'",
    [u.clerkB.id],
  )
  t.equal(expiring.rows[0]?.expires_at.getTime(), tomorrow.getTime(), 'the override the file kept keeps its expiry')
  t.ok(service.engine.decide(u.clerkA, 'm-1', 'orders', 'refund'), 'memory follows: the override now allows')
  t.notOk(service.engine.decide(u.clerkB, 'm-1', 'orders', 'refund'), 'and the revoked role grant is gone')
  const inactive = await service.db.query("SELECT count(*)::int AS n FROM casbin_rule WHERE v2 = 'customers' AND v3 = 'export'")
  t.same(inactive.rows, [{ n: 1 }], "the inactive pair's rule, which no file can name, stays")
  t.equal(summarizeDiff((await importPolicy(service, edited)).diff), 'no change: the store already holds this policy', 'a second import changes nothing')

  t.test('--domain m-1 changes m-1 only', async (t) => {
    const m1 = (await exportPolicy(service, { domain: 'm-1' })).csv
    // Only m-1 lines and the context: every m-1 rule dropped, one added.
    const wanted = `${headerOf('m-1')}${rulesOf(m1)
      .filter((l) => !l.includes(', m-1, '))
      .join('\n')}\np, supervisor, m-1, orders, read, allow\n`
    const m2Before = (await exportPolicy(service, { domain: 'm-2' })).csv
    const held = await fingerprint(service.db)
    const tooMuch = await importPolicy(service, wanted, { domain: 'm-1', dryRun: true })
    t.match(tooMuch.refusal, /^the import would remove \d+ of the \d+ rules in its reach .*more than 5 and more than 10%/, 'removing most of m-1 is held back')
    await t.rejects(importPolicy(service, wanted, { domain: 'm-1' }), { name: 'PolicyFileRefused', message: tooMuch.refusal ?? '' })
    t.same(await fingerprint(service.db), held, 'nothing changed')
    const result = await importPolicy(service, wanted, { domain: 'm-1', allowMassRemoval: true })
    t.ok(result.diff.removed.length > 3, `${result.diff.removed.length} m-1 rules removed`)
    t.ok(result.diff.removed.every((r) => r.values[1] === 'm-1'), 'only m-1 rules removed')
    t.same(describeDiff({ ...result.diff, removed: [] }), ['+ p, supervisor, m-1, orders, read, allow'])
    t.equal((await exportPolicy(service, { domain: 'm-2' })).csv, m2Before, 'm-2 and global untouched')
    t.same(
      linesOf((await exportPolicy(service, { domain: 'm-1' })).csv).filter((l) => l.includes(', m-1, ')),
      ['p, supervisor, m-1, orders, read, allow'],
      'm-1 holds what the file says',
    )
  })
})

t.test('another replica follows an import from the change feed, in place', { skip: backend === 'postgres' ? false : 'a second replica needs PostgreSQL' }, async (t) => {
  const db = await freshDatabase(t)
  const w = await buildWorld(t, { inactivePair: false, db })
  const other = await buildTestApp(t, { db: secondConnection(t, db) })
  const u = w.byName as Record<'clerkA' | 'clerkC' | 'ops', Account>
  const base = (await exportPolicy(w.service)).csv
  const edited =
    base
      .replace('p, clerk, global, orders, read, allow\n', '')
      .replace(`p, ${u.clerkA.id}, m-1, orders, refund, deny\n`, `p, ${u.clerkA.id}, m-1, orders, refund, allow\n`)
      .replace(`p, ${u.ops.id}, global, payouts, read, deny\n`, '') + `p, auditor, m-2, orders, read, allow\np, ${u.clerkC.id}, m-2, products, write, deny\n`
  const reloads = other.service.replica.reloads
  const imported = await importPolicy(w.service, edited)
  t.equal(imported.diff.added.length + imported.diff.removed.length + imported.diff.changed.length, 5)
  const start = Date.now()
  await eventually(() => other.service.replica.revision >= imported.revision)
  t.ok(other.service.replica.revision >= imported.revision, `the other replica reached revision ${imported.revision} in ${Date.now() - start} ms`)
  t.equal(other.service.replica.reloads, reloads, 'by applying the change feed, without a reload')
  const here = decisions(w)
  const there = decisions({ ...w, service: other.service })
  t.same(differing(here, there), [], `the same ${here.size} decisions on both replicas`)
  t.notOk(other.service.engine.decide(u.clerkC, 'm-2', 'products', 'write'), "the new deny counts on the other replica")
  t.ok(other.service.engine.decide(u.clerkA, 'm-1', 'orders', 'refund'), 'and the override whose effect changed')
})

t.test(`the command line (${backend})`, async (t) => {
  // No inactive pair here: every command builds the service, which brings the catalog back in line with the code.
  const w = await buildWorld(t, { inactivePair: false })
  const { service } = w
  const dir = tempDir(t)
  const cli = cliOn(service.db)
  const write = (name: string, text: string) => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }

  const exported = await cli('policy', 'export')
  t.equal(exported.code, 0, exported.err)
  t.equal(`${exported.out}\n`, (await exportPolicy(service)).csv, 'stdout is the CSV, nothing else')
  t.equal(exported.err, '')
  const m1 = await cli('policy', 'export', '--domain', 'm-1')
  t.equal(`${m1.out}\n`, (await exportPolicy(service, { domain: 'm-1' })).csv)
  t.same(await cli('policy', 'export', '--domain', 'm-404'), { code: 1, out: '', err: 'Merchant m-404 not found.' })
  const badDomain = await cli('policy', 'export', '--domain', 'a,b')
  t.equal(badDomain.code, 2)
  t.match(badDomain.err, /--domain contains characters that are not allowed/)

  const file = write('policy.csv', `${exported.out.replace('p, clerk, m-2, products, write, allow\n', '')}\np, clerk, m-2, orders, cancel, allow\n`)
  const before = await fingerprint(service.db)
  const dry = await cli('policy', 'import', '--file', file, '--dry-run')
  t.equal(dry.code, 0, dry.err)
  t.equal(
    dry.out,
    [
      '+ p, clerk, m-2, orders, cancel, allow',
      '- p, clerk, m-2, products, write, allow',
      '2 changes: 1 added, 1 removed, 0 overrides change effect or expiry',
      'dry run: nothing was written',
    ].join('\n'),
  )
  t.same(await fingerprint(service.db), before, 'the dry run wrote nothing')

  const applied = await cli('policy', 'import', '--file', file)
  t.equal(applied.code, 0, applied.err)
  const after = await fingerprint(service.db)
  t.match(applied.out, new RegExp(`2 changes: 1 added, 1 removed, 0 overrides change effect or expiry\napplied in one transaction, revision ${after.revision}$`))
  t.equal(after.audit - before.audit, 2)
  const again = await cli('policy', 'import', '--file', file)
  t.same(again, { code: 0, out: 'no change: the store already holds this policy', err: '' })

  const bad = write('bad.csv', `${exported.out}\np, super_admin, global, orders, read, allow\np, clerk, m-1, orders, nuke, allow\n`)
  const refused = await cli('policy', 'import', '--file', bad)
  const n = linesOf(exported.out).length
  t.equal(refused.code, 2, 'a line that breaks the rules: exit code 2')
  t.equal(refused.out, '')
  t.equal(
    refused.err,
    [
      `${bad}:${n + 1}: super_admin is a root sub-role: it holds every permission and takes no grants`,
      `${bad}:${n + 2}: orders:nuke is not active in the catalog`,
      `${bad} was refused: 2 lines of the policy file break the rules; nothing was changed`,
    ].join('\n'),
  )
  t.same(await fingerprint(service.db), after, 'nothing changed')

  const large = join(dir, 'large.csv')
  writeFileSync(large, '')
  truncateSync(large, MAX_POLICY_FILE_BYTES + 1)
  const tooLarge = await cli('policy', 'import', '--file', large)
  t.equal(tooLarge.code, 2)
  t.match(tooLarge.err, `holds more than ${MAX_POLICY_FILE_BYTES} bytes; a policy file may have at most ${MAX_POLICY_FILE_BYTES}`)
  const missing = await cli('policy', 'import', '--file', join(dir, 'nope.csv'))
  t.equal(missing.code, 2)
  t.match(missing.err, /cannot read the policy file/)
  const noFile = await cli('policy', 'import')
  t.equal(noFile.code, 2)
  t.match(noFile.err, /--file is required/)
  t.equal((await cli('policy', 'import', '--file', file, '--force')).code, 2, 'an unknown option')
  t.equal((await cli('policy', 'import', '--file', file, '--domain', 'm-404')).code, 1, 'an unknown --domain')
  t.match((await cli('--help')).out, /policy import --file F \[--domain D\] \[--dry-run\] \[--allow-mass-removal\]/, 'the help names both commands')
  t.same(await fingerprint(service.db), after, 'still nothing changed')
})

t.test('parsing reads what Casbin reads', async (t) => {
  const { lines, problems } = parsePolicyCsv(
    ['# a comment', '', '   ', 'p,clerk,m-1,orders,read,allow', ' p , "clerk" , m-1 , orders , cancel , deny \r', 'g, u, clerk, m-1', 'p, "a, b", c'].join('\n'),
  )
  t.same(
    lines.map((l) => [l.line, l.ptype, ...l.values]),
    [
      [4, 'p', 'clerk', 'm-1', 'orders', 'read', 'allow'],
      [5, 'p', 'clerk', 'm-1', 'orders', 'cancel', 'deny'],
      [6, 'g', 'u', 'clerk', 'm-1'],
    ],
  )
  t.same(problems, [{ line: 7, reason: 'expected p, <sub-role or user id>, <domain>, <obj>, <act>, allow|deny' }])
})

t.test('the real command line: exit codes of a child process', { skip: pgliteRunOnly('an embedded store in a folder of its own, whatever DATABASE_URL says') }, async (t) => {
  const run = promisify(execFile)
  const dir = tempDir(t, 'policy-process-')
  const cwd = new URL('../..', import.meta.url).pathname
  const env = { ...process.env, DATABASE_URL: `pglite://${dir}/store`, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' }
  const main = (...args: string[]) =>
    run(process.execPath, [...TEST_NODE_ARGS, 'src/cli/main.ts', ...args], { cwd, env, timeout: 60_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    )
  const exported = await main('policy', 'export')
  t.same(exported, { code: 0, stdout: HEADER_ALL, stderr: '' }, 'an empty store exports the header alone')

  const good = join(dir, 'good.csv')
  writeFileSync(good, `${HEADER_ALL}p, clerk, global, orders, read, allow\n`)
  const dry = await main('policy', 'import', '--file', good, '--dry-run')
  t.equal(dry.code, 0, dry.stderr)
  t.equal(dry.stdout, '+ p, clerk, global, orders, read, allow\n1 change: 1 added, 0 removed, 0 overrides change effect or expiry\ndry run: nothing was written\n')
  const bad = join(dir, 'bad.csv')
  writeFileSync(bad, `${HEADER_ALL}p, clerk, global, orders, read, allow\np, clerk, m-9, orders, read, allow\n`)
  const refused = await main('policy', 'import', '--file', bad)
  t.equal(refused.code, 2, 'a line that breaks the rules: exit code 2')
  t.match(refused.stderr, new RegExp(`${bad}:4: unknown domain "m-9"`))
  t.notMatch(refused.stderr, /\n\s+at /, 'no stack trace')
})
