/**
 * Expiring overrides: grant and deny overrides accept `expires_at`; at that
 * instant the override stops counting on every replica without a write, and
 * its row is removed with one `override_expired` audit entry (actor
 * `system`), even when several replicas sweep. Time is a clock the test
 * moves, never a wait for real minutes.
 */
import t, { type Test } from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { deleteOverride, setOverride } from '../../src/storage/overrides.js'
import { backend, buildTestApp, freshDatabase, onboard, register, secondConnection, type TestApp } from '../helper.js'
import { eventually } from '../support/eventually.js'
import { ManualClock } from '../support/manualClock.js'

const HOUR = 3_600_000

/** Whether `condition` comes to hold (bounded polling: how soon a change applies is a benchmark's concern). */
const within = (condition: () => boolean | Promise<boolean>): Promise<boolean> => eventually(condition)

const iso = (clock: ManualClock, offsetMs: number) => new Date(clock.now() + offsetMs).toISOString()

const override = (ta: TestApp, action: 'grant' | 'deny' | 'revoke', user: Account, data: Record<string, unknown>) =>
  ta.call({
    method: action === 'revoke' ? 'DELETE' : 'POST',
    url: `/v2/admin/permissions/users/${user.id}/${action}`,
    body: { command: `${action}-user-permission`, data },
  })

const allowed = async (ta: TestApp, user: Account, obj = 'orders', act = 'refund') => {
  const res = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=${obj}&act=${act}&user_id=${user.id}` })
  return (res.json() as { data: { allowed: boolean } }).data.allowed
}

const expiredEntries = async (ta: TestApp) => {
  const res = await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log?action=override_expired&page_size=100' })
  return (res.json() as { data: { items: Array<{ actor_id: string; target_id: string; obj: string; act: string; domain: string }> } }).data.items
}

async function world(t: Test, clock: ManualClock, db?: Awaited<ReturnType<typeof freshDatabase>>) {
  const ta = await buildTestApp(t, { clock, ...(db !== undefined ? { db } : {}) })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  return { ta, clerk }
}

t.test('an allow override counts until its instant, then stops, and is removed with one audit entry', async (t) => {
  const clock = new ManualClock()
  const { ta, clerk } = await world(t, clock)
  const expiresAt = iso(clock, HOUR)

  const granted = await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: expiresAt })
  t.equal(granted.statusCode, 200, granted.body)
  t.match(granted.json(), { data: { changed: true, effect: 'allow', expires_at: expiresAt } })
  t.equal(await allowed(ta, clerk), true, 'counted before its instant')

  const listing = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${clerk.id}` })
  const item = (listing.json() as { data: { permissions: Array<{ obj: string; act: string; source: string; expires_at: string | null }> } }).data.permissions.find(
    (p) => p.obj === 'orders' && p.act === 'refund',
  )
  t.match(item, { source: 'user', expires_at: expiresAt }, 'the listing shows when it expires')

  clock.advance(HOUR - 1)
  t.equal(await allowed(ta, clerk), true, 'still counted a millisecond before')
  t.equal((await expiredEntries(ta)).length, 0, 'nothing expired yet')

  clock.advance(1)
  t.ok(await within(async () => !(await allowed(ta, clerk))), 'not counted once its instant has passed, without any write')
  t.ok(await within(async () => (await expiredEntries(ta)).length === 1), 'one override_expired entry')
  const [entry] = await expiredEntries(ta)
  t.match(entry, { actor_id: 'system', target_id: clerk.id, obj: 'orders', act: 'refund', domain: 'm1' })
  const { rows } = await ta.service.db.query('SELECT 1 FROM permission_overrides WHERE user_id = $1', [clerk.id])
  t.equal(rows.length, 0, 'the row is gone')
  const after = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${clerk.id}` })
  t.notOk(JSON.stringify(after.json()).includes('"refund"'), 'the listing no longer shows it')
})

t.test('a deny override that expires gives the role grant back', async (t) => {
  const clock = new ManualClock()
  const { ta, clerk } = await world(t, clock)
  const grant = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund', domain: 'm1' } },
  })
  t.equal(grant.statusCode, 200)
  const denied = await override(ta, 'deny', clerk, { obj: 'orders', act: 'refund', expires_at: iso(clock, 30 * 60_000) })
  t.match(denied.json(), { data: { changed: true, effect: 'deny' } })
  t.equal(await allowed(ta, clerk), false, 'the deny counts')
  clock.advance(30 * 60_000)
  t.ok(await within(() => allowed(ta, clerk)), 'the role grant counts again once the deny expired')
  t.ok(await within(async () => (await expiredEntries(ta)).length === 1))
})

t.test('changing or removing the expiry is a change; repeating it is not', async (t) => {
  const clock = new ManualClock()
  const { ta, clerk } = await world(t, clock)
  const first = iso(clock, HOUR)
  t.match((await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: first })).json(), { data: { changed: true } })
  t.match((await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: first })).json(), { data: { changed: false } }, 'same instant')
  const later = iso(clock, 2 * HOUR)
  t.match((await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: later })).json(), { data: { changed: true, expires_at: later } })
  clock.advance(HOUR)
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(await allowed(ta, clerk), true, 'the first instant no longer applies')
  t.match((await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund' })).json(), { data: { changed: true, expires_at: null } }, 'made permanent')
  clock.advance(2 * HOUR)
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(await allowed(ta, clerk), true, 'a permanent override does not expire')
  t.equal((await expiredEntries(ta)).length, 0, 'and nothing was audited as expired')
})

t.test('an expiry that is not ahead, or not a time, is refused; role and revoke commands take none', async (t) => {
  const clock = new ManualClock()
  const { ta, clerk } = await world(t, clock)
  const past = await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: iso(clock, 0) })
  t.equal(past.statusCode, 400)
  t.equal((past.json() as { response_code: string }).response_code, '110', 'the present instant is not ahead')
  const spanish = await ta.call({
    method: 'POST',
    url: `/v2/admin/permissions/users/${clerk.id}/deny`,
    headers: { 'accept-language': 'es' },
    body: { command: 'deny-user-permission', data: { obj: 'orders', act: 'refund', expires_at: iso(clock, -HOUR) } },
  })
  t.equal(spanish.statusCode, 400)
  t.match((spanish.json() as { response_text: string }).response_text, /futuro/, 'localised')
  const garbled = await override(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: 'next friday' })
  t.equal(garbled.statusCode, 400)
  t.equal((garbled.json() as { response_code: string }).response_code, '100')
  const revoke = await override(ta, 'revoke', clerk, { obj: 'orders', act: 'refund', expires_at: iso(clock, HOUR) })
  t.equal(revoke.statusCode, 400, 'revoke takes no expiry')
  const role = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund', domain: 'm1', expires_at: iso(clock, HOUR) } },
  })
  t.equal(role.statusCode, 400, 'role grants do not expire')
  const { rows } = await ta.service.db.query('SELECT 1 FROM permission_overrides')
  t.equal(rows.length, 0, 'nothing was written')
})

t.test('a write that finds an expired row not yet swept audits its expiry and starts afresh', async (t) => {
  const db = await freshDatabase(t)
  const clock = new ManualClock()
  const { ta, clerk } = await world(t, clock, db)
  const key = { user_id: clerk.id, domain: 'm1', obj: 'orders', act: 'refund' }
  const now = new Date(clock.now())
  const first = await setOverride(db, { ...key, effect: 'deny', expires_at: new Date(now.getTime() + 1000) }, 'test', now)
  t.same(first, { previous: null, expired: null })
  const later = new Date(now.getTime() + 2000)
  const second = await setOverride(db, { ...key, effect: 'allow' }, 'test', later)
  t.equal(second.previous, null, 'the expired deny is not in force')
  t.equal(second.expired?.effect, 'deny', 'and is reported as expired')
  const removed = await deleteOverride(db, key, later)
  t.equal(removed.previous?.effect, 'allow')
  t.equal(removed.expired, null)
  await ta.service.reload()

  // Through the command: the deny expires with no sweep in between (the sweep is what this test plays).
  const denied = await override(ta, 'deny', clerk, { obj: 'orders', act: 'refund', expires_at: iso(clock, 1000) })
  t.equal(denied.statusCode, 200)
  await db.query("UPDATE permission_overrides SET expires_at = $1 WHERE user_id = $2", [new Date(clock.now() - 1), clerk.id])
  const revoked = await override(ta, 'revoke', clerk, { obj: 'orders', act: 'refund' })
  t.match(revoked.json(), { data: { changed: false } }, 'revoking an expired override removes nothing in force')
  const entries = await expiredEntries(ta)
  t.equal(entries.length, 1, 'but its expiry is audited, once')
  const { rows } = await db.query('SELECT 1 FROM permission_overrides')
  t.equal(rows.length, 0)
})

t.test('a service that starts after an instant passed neither counts the override nor forgets to audit it', async (t) => {
  const db = await freshDatabase(t)
  const clock = new ManualClock()
  const first = await world(t, clock, db)
  const granted = await override(first.ta, 'grant', first.clerk, { obj: 'orders', act: 'refund', expires_at: iso(clock, HOUR) })
  t.equal(granted.statusCode, 200)
  await first.ta.service.close()

  clock.advance(2 * HOUR)
  const second = await buildTestApp(t, { db, clock })
  t.equal(await allowed(second, first.clerk), false, 'not loaded once expired')
  t.ok(await within(async () => (await expiredEntries(second)).length === 1), 'swept at start, audited once')
})

t.test('with two replicas the override stops on both and its expiry is audited once', { skip: backend === 'postgres' ? false : 'several replicas need PostgreSQL' }, async (t) => {
  const db = await freshDatabase(t)
  const clock = new ManualClock()
  const a = await buildTestApp(t, { db, clock, env: { REVISION_POLL_MS: '60000' } })
  const b = await buildTestApp(t, { db: secondConnection(t, db), clock, env: { REVISION_POLL_MS: '60000' } })
  await onboard(a, 'm1')
  const clerks: Account[] = []
  for (let i = 0; i < 5; i++) clerks.push(await register(a, { email: `clerk${i}@m1.example`, sub_role_code: 'clerk', merchant_id: 'm1' }))
  for (const clerk of clerks) {
    const res = await override(a, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: iso(clock, HOUR) })
    t.equal(res.statusCode, 200)
  }
  const last = clerks[clerks.length - 1] as Account
  t.ok(await within(() => allowed(b, last)), 'B follows the grants')

  clock.advance(HOUR)
  for (const clerk of clerks) {
    t.ok(await within(async () => !(await allowed(a, clerk)) && !(await allowed(b, clerk))), 'neither replica counts it')
  }
  t.ok(await within(async () => (await expiredEntries(a)).length === clerks.length), 'every expiry audited')
  await new Promise((resolve) => setTimeout(resolve, 200))
  const entries = await expiredEntries(b)
  t.equal(entries.length, clerks.length, 'once each, though both replicas swept')
  t.equal(new Set(entries.map((e) => e.target_id)).size, clerks.length)
})
