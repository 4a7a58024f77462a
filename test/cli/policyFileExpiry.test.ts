/**
 * An override's expiry travels in the policy file (a `# expires_at` comment
 * that Casbin's file adapter skips), and an import leaves out, and names, an
 * override whose instant has passed: an older export restored does not bring
 * back an access that ran out. On PGlite and on PostgreSQL.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { FileAdapter, newEnforcer } from 'casbin'
import t from 'tap'
import { exportPolicy } from '../../src/commands/exportPolicy.js'
import { importPolicy } from '../../src/commands/importPolicy.js'
import { parsePolicyCsv } from '../../src/domain/policyCsv.js'
import { summarizeDiff } from '../../src/domain/policyDiff.js'
import { setUserPermission } from '../../src/commands/userOverrides.js'
import { ManualClock } from '../support/manualClock.js'
import { fingerprint } from '../support/policyWorld.js'
import { repositoryRoot } from '../support/serverProcess.js'
import { backend, buildTestApp, onboard, register, tempDir } from '../helper.js'

const MODEL = join(repositoryRoot, 'model.conf')
const HOUR = 3_600_000

t.test(`an override's expiry is carried by the file, and an import skips one that has passed (${backend})`, async (t) => {
  const clock = new ManualClock(Date.now())
  const ta = await buildTestApp(t, { clock })
  const { service } = ta
  await onboard(ta, 'm-1')
  const clerk = await register(ta, { email: 'clerk@m-1.example', sub_role_code: 'clerk', merchant_id: 'm-1' })
  const other = await register(ta, { email: 'other@m-1.example', sub_role_code: 'clerk', merchant_id: 'm-1' })
  const root = { account: ta.root, ip: null }
  const soon = new Date(clock.now() + HOUR)
  const later = new Date(clock.now() + 48 * HOUR)
  await setUserPermission(service, root, clerk.id, { obj: 'payouts', act: 'approve', expires_at: soon.toISOString() }, 'allow')
  await setUserPermission(service, root, other.id, { obj: 'orders', act: 'refund', expires_at: later.toISOString() }, 'allow')
  await setUserPermission(service, root, other.id, { obj: 'orders', act: 'cancel' }, 'deny')

  const old = (await exportPolicy(service)).csv
  const line = `p, ${clerk.id}, m-1, payouts, approve, allow`
  t.ok(old.includes(`# expires_at ${soon.toISOString()}\n${line}\n`), 'the expiry on the comment line before the override')
  t.ok(old.includes(`# expires_at ${later.toISOString()}\np, ${other.id}, m-1, orders, refund, allow\n`))
  t.ok(old.includes(`\np, ${other.id}, m-1, orders, cancel, deny\n`) && !old.includes(`# expires_at ${new Date(0).toISOString()}`), 'an override that never expires has no comment')

  // Casbin's own file adapter skips the comments: the file loads and decides as its p and g lines say.
  const file = join(tempDir(t), 'policy.csv')
  writeFileSync(file, old)
  const casbin = await newEnforcer(MODEL, new FileAdapter(file))
  t.equal((await casbin.getPolicy()).length, 3, 'three p lines loaded, no comment taken for one')
  t.ok(await casbin.enforce(clerk.id, 'm-1', 'payouts', 'approve'), 'the expiring override decides while it counts')
  t.notOk(await casbin.enforce(other.id, 'm-1', 'orders', 'cancel'))
  const parsed = parsePolicyCsv(old)
  t.same(parsed.problems, [])
  t.same(
    parsed.lines.filter((l) => l.expiresAt !== undefined).map((l) => [l.values[0], l.expiresAt]),
    [
      [clerk.id, soon.getTime()],
      [other.id, later.getTime()],
    ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    'the import reads each instant back onto its line',
  )

  // The clerk's override runs out and the sweep removes it; then the old file is restored.
  clock.advance(2 * HOUR)
  const deadline = Date.now() + 20_000
  const remaining = async () =>
    (await service.db.query('SELECT 1 FROM permission_overrides WHERE user_id = $1', [clerk.id])).rows.length
  while ((await remaining()) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(await remaining(), 0, 'the sweep removed the expired override')
  t.notOk(service.engine.decide(clerk, 'm-1', 'payouts', 'approve'))

  const before = await fingerprint(service.db)
  const dry = await importPolicy(service, old, { dryRun: true })
  const skipped = dry.expired.map((e) => e.rule.values.join(', '))
  t.same(skipped, [`${clerk.id}, m-1, payouts, approve, allow`], 'the dry run names the override that has expired')
  t.equal(summarizeDiff(dry.diff), 'no change: the store already holds this policy', 'and does not add it back')
  const done = await importPolicy(service, old)
  t.same(done.expired.map((e) => e.line), dry.expired.map((e) => e.line), 'the import names it too')
  t.same(await fingerprint(service.db), before, 'nothing was written')
  t.notOk(service.engine.decide(clerk, 'm-1', 'payouts', 'approve'), 'the access that ran out stays out')

  // The file's expiry is the one set: restored after a wipe, and changed when the file says another.
  await service.db.query('DELETE FROM permission_overrides')
  await service.reload()
  const restored = await importPolicy(service, old)
  t.equal(restored.diff.added.length, 2, 'the two overrides still in force come back')
  const expiries = await service.db.query<{ act: string; expires_at: Date | null }>('SELECT act, expires_at FROM permission_overrides ORDER BY act')
  t.same(
    expiries.rows.map((r) => [r.act, r.expires_at?.toISOString() ?? null]),
    [
      ['cancel', null],
      ['refund', later.toISOString()],
    ],
    'each with the expiry the file gave it',
  )
  const sooner = new Date(clock.now() + 5 * HOUR)
  const edited = old.replace(`# expires_at ${later.toISOString()}\n`, `# expires_at ${sooner.toISOString()}\n`).replace(
    `p, ${other.id}, m-1, orders, cancel, deny\n`,
    `# expires_at ${later.toISOString()}\np, ${other.id}, m-1, orders, cancel, deny\n`,
  )
  const changed = await importPolicy(service, edited)
  t.equal(summarizeDiff(changed.diff), '2 changes: 0 added, 0 removed, 2 overrides change effect or expiry')
  t.equal(service.engine.overrideExpiresAt(other.id, 'm-1', 'orders', 'refund'), sooner.getTime(), 'memory has the new expiry')
  t.equal(service.engine.overrideExpiresAt(other.id, 'm-1', 'orders', 'cancel'), later.getTime(), 'and an override that now expires')

  // A file without a header (from before expiries were written) keeps the stored expiry of each override it keeps.
  const legacy = `p, ${other.id}, m-1, orders, cancel, deny\np, ${other.id}, m-1, orders, refund, allow\n`
  const kept = await importPolicy(service, legacy, { allowHeaderless: true, dryRun: true })
  t.equal(summarizeDiff(kept.diff), 'no change: the store already holds this policy', 'a headerless file does not take expiries away')

  const misplaced = parsePolicyCsv(`# policy-format: 1\n# scope: all\n# expires_at ${later.toISOString()}\np, clerk, m-1, orders, read, allow\n# expires_at tomorrow\n`)
  t.same(
    misplaced.problems,
    [
      { line: 3, reason: "an expires_at comment must come just before a user's override line" },
      { line: 5, reason: 'expires_at must be an RFC 3339 instant such as 2030-01-31T18:00:00Z, not "tomorrow"' },
    ],
    'an expiry on a role rule, and one that is not an instant, are named',
  )
})

