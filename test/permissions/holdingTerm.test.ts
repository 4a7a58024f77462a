/**
 * What a caller holds only until an override of its own expires, it passes on
 * until then at most: user grants and denies past that instant, role grants
 * (which never expire) and sub-roles holding the pair are refused with 403
 * `302`, dry runs included; so is lifting a deny (a revoke, an allow or a
 * shorter deny in its place) that would have counted past that instant.
 * Time is a clock the test moves.
 */
import t, { type Test } from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { holdsUntil } from '../../src/commands/permissionContext.js'
import { buildTestApp, onboard, register, type TestApp } from '../helper.js'
import { eventually } from '../support/eventually.js'
import { ManualClock } from '../support/manualClock.js'
import { roleCommand, userCommand } from '../support/permissionCommands.js'

const HOUR = 3_600_000

const roleGrant = (ta: TestApp, role: string, data: Record<string, unknown>, token = ta.rootToken) => roleCommand(ta, 'grant', role, data, token)

const allowed = async (ta: TestApp, user: Account, obj: string, act: string) => {
  const res = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=${obj}&act=${act}&user_id=${user.id}` })
  return (res.json() as { data: { allowed: boolean } }).data.allowed
}

/** Whether `condition` comes to hold (bounded polling, not a timed assertion). */
const within = (condition: () => Promise<boolean>): Promise<boolean> => eventually(condition)

function expect(t: Test, res: { statusCode: number; body: string; json(): unknown }, status: number, code: string | null, name: string): void {
  t.equal(res.statusCode, status, `${name}: ${res.body}`)
  if (code !== null) t.equal((res.json() as { response_code: string }).response_code, code, `${name}: code ${code}`)
}

/** m1 with a clerk and a manager who may grant and deny (permission:assign) and holds orders:refund until T through its own override. */
async function world(t: Test) {
  const clock = new ManualClock()
  const ta = await buildTestApp(t, { clock })
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const manager = await register(ta, { email: 'manager@m1.example', sub_role_code: 'manager', merchant_id: 'm1' })
  for (const pair of ['permission:assign', 'permission:revoke', 'admin:register']) {
    const [obj, act] = pair.split(':')
    t.equal((await roleGrant(ta, 'manager', { obj, act, domain: 'm1' })).statusCode, 200, `manager holds ${pair}`)
  }
  const T = new Date(clock.now() + HOUR).toISOString()
  t.equal((await userCommand(ta, 'grant', manager, { obj: 'orders', act: 'refund', expires_at: T })).statusCode, 200, 'the manager holds orders:refund until T')
  return { clock, ta, owner, clerk, manager, T, token: ta.tokenFor(manager) }
}

t.test('an override held until T is passed on until T at most', async (t) => {
  const { clock, ta, clerk, manager, T, token } = await world(t)
  const at = (offset: number) => new Date(Date.parse(T) + offset).toISOString()
  const refund = { obj: 'orders', act: 'refund' }

  const refused: Array<[string, () => ReturnType<TestApp['call']>]> = [
    ['re-granting itself the pair for good', () => userCommand(ta, 'grant', manager, refund, token)],
    ['re-granting itself the pair past T', () => userCommand(ta, 'grant', manager, { ...refund, expires_at: at(1) }, token)],
    ['granting another user the pair for good', () => userCommand(ta, 'grant', clerk, refund, token)],
    ['granting another user the pair past T', () => userCommand(ta, 'grant', clerk, { ...refund, expires_at: at(HOUR) }, token)],
    ['the same as a dry run', () => userCommand(ta, 'grant', clerk, { ...refund, dry_run: true }, token)],
    ['denying another user the pair for good', () => userCommand(ta, 'deny', clerk, refund, token)],
    ['denying it past T, as a dry run', () => userCommand(ta, 'deny', clerk, { ...refund, expires_at: at(1), dry_run: true }, token)],
    ['granting the pair to a role (role grants never expire)', () => roleGrant(ta, 'clerk', { ...refund, domain: 'm1' }, token)],
    ['the same as a dry run', () => roleGrant(ta, 'clerk', { ...refund, domain: 'm1', dry_run: true }, token)],
    ['granting the pair to its own sub-role', () => roleGrant(ta, 'manager', { ...refund, domain: 'm1' }, token)],
  ]
  for (const [name, call] of refused) expect(t, await call(), 403, '302', name)
  t.equal(await allowed(ta, clerk, 'orders', 'refund'), false, 'the clerk was given nothing')
  const { rows } = await ta.service.db.query("SELECT 1 FROM casbin_rule WHERE ptype = 'p' AND v2 = 'orders' AND v3 = 'refund'")
  t.equal(rows.length, 0, 'no role row was written')

  expect(t, await userCommand(ta, 'grant', clerk, { ...refund, expires_at: T }, token), 200, '001', 'granting another user the pair until T')
  expect(t, await userCommand(ta, 'grant', manager, { ...refund, expires_at: at(-1) }, token), 200, '001', 'shortening its own override')
  expect(t, await userCommand(ta, 'grant', manager, { ...refund, expires_at: T }, token), 403, '302', 'but not lengthening it back to T')
  expect(t, await userCommand(ta, 'deny', clerk, { ...refund, expires_at: at(-HOUR / 2), dry_run: true }, token), 200, '001', 'a deny until before T, as a dry run')
  expect(t, await userCommand(ta, 'revoke', clerk, refund, token), 200, '001', 'revoking needs no term')

  // Held for good through its sub-role, the pair may be passed on for good.
  t.equal((await roleGrant(ta, 'manager', { ...refund, domain: 'm1' })).statusCode, 200)
  expect(t, await userCommand(ta, 'grant', clerk, refund, token), 200, '001', 'once held for good, granted for good')
  expect(t, await roleGrant(ta, 'clerk', { ...refund, domain: 'm1', dry_run: true }, token), 200, '001', 'and to a role')

  clock.advance(HOUR)
  t.equal(await allowed(ta, manager, 'orders', 'refund'), true, 'after T the manager holds it through its sub-role')
  t.equal(await allowed(ta, clerk, 'orders', 'refund'), true, 'and the clerk through its permanent override')
})

t.test('after T the pair passed on until T is gone with the caller’s own', async (t) => {
  const { clock, ta, clerk, manager, T, token } = await world(t)
  expect(t, await userCommand(ta, 'grant', clerk, { obj: 'orders', act: 'refund', expires_at: T }, token), 200, '001', 'granted until T')
  t.equal(await allowed(ta, clerk, 'orders', 'refund'), true)
  clock.advance(HOUR)
  t.ok(await within(async () => !(await allowed(ta, manager, 'orders', 'refund')) && !(await allowed(ta, clerk, 'orders', 'refund'))), 'neither holds it')
  expect(t, await userCommand(ta, 'grant', manager, { obj: 'orders', act: 'refund', expires_at: new Date(clock.now() + HOUR).toISOString() }, token), 403, '302', 'nor can take it again')
})

t.test('a deny is lifted only within the caller’s own holding term', async (t) => {
  const { ta, owner, clerk, T, token } = await world(t)
  const refund = { obj: 'orders', act: 'refund' }
  const ownerToken = ta.tokenFor(owner)
  t.equal((await roleGrant(ta, 'clerk', { ...refund, domain: 'm1' })).statusCode, 200, 'the clerk holds orders:refund through its sub-role')
  expect(t, await userCommand(ta, 'deny', clerk, refund, ownerToken), 200, '001', "the merchant's super_admin denies it to the clerk for good")

  const refused: Array<[string, () => ReturnType<TestApp['call']>]> = [
    ['revoking the permanent deny', () => userCommand(ta, 'revoke', clerk, refund, token)],
    ['the same as a dry run', () => userCommand(ta, 'revoke', clerk, { ...refund, dry_run: true }, token)],
    ['replacing it with an allow until T', () => userCommand(ta, 'grant', clerk, { ...refund, expires_at: T }, token)],
    ['shortening it to a deny until T', () => userCommand(ta, 'deny', clerk, { ...refund, expires_at: T }, token)],
  ]
  for (const [name, call] of refused) expect(t, await call(), 403, '302', name)
  t.equal(await allowed(ta, clerk, 'orders', 'refund'), false, 'the deny stands')
  const { rows } = await ta.service.db.query("SELECT effect, expires_at FROM permission_overrides WHERE user_id = $1 AND obj = 'orders' AND act = 'refund'", [clerk.id])
  t.same(rows, [{ effect: 'deny', expires_at: null }], 'unchanged in the store')

  const half = new Date(Date.parse(T) - HOUR / 2).toISOString()
  expect(t, await userCommand(ta, 'deny', clerk, { ...refund, expires_at: half }, ownerToken), 200, '001', 'the super_admin shortens its deny to before T')
  expect(t, await userCommand(ta, 'deny', clerk, { ...refund, expires_at: T }, token), 200, '001', 'a deny ending before T may be lengthened to T')
  expect(t, await userCommand(ta, 'revoke', clerk, refund, token), 200, '001', 'and one ending by T lifted')
  t.equal(await allowed(ta, clerk, 'orders', 'refund'), true, 'the clerk holds the pair again')

  expect(t, await userCommand(ta, 'deny', clerk, refund, ownerToken), 200, '001', 'denied for good again')
  expect(t, await userCommand(ta, 'revoke', clerk, refund, ownerToken), 200, '001', 'a root caller lifts any deny')
  expect(t, await userCommand(ta, 'deny', clerk, refund, ownerToken), 200, '001', 'and denied for good once more')
  t.equal((await roleGrant(ta, 'manager', { ...refund, domain: 'm1' })).statusCode, 200, 'the manager now holds the pair for good')
  expect(t, await userCommand(ta, 'revoke', clerk, refund, token), 200, '001', 'and lifts the permanent deny')
})

t.test('a sub-role holding a pair the caller holds only until T is not handed out with an account', async (t) => {
  const { ta, owner, clerk, token } = await world(t)
  t.equal((await roleGrant(ta, 'refunder', { obj: 'orders', act: 'refund', domain: 'm1' })).statusCode, 200)
  const registered = await ta.call({
    method: 'POST',
    url: '/v2/admin/register',
    token,
    body: { command: 'register-admin', data: { email: 'second@m1.example', password: 'admin-pass-123', name: 'Second', sub_role_code: 'refunder' } },
  })
  expect(t, registered, 403, '302', 'registering an account it would log in as')
  t.equal((await roleGrant(ta, 'manager', { obj: 'admin', act: 'manage', domain: 'm1' })).statusCode, 200)
  const moved = await ta.call({
    method: 'POST',
    url: `/v2/admin/accounts/${clerk.id}/sub-role`,
    token,
    body: { command: 'change-sub-role', data: { sub_role_code: 'refunder' } },
  })
  expect(t, moved, 403, '302', 'moving an account to it')
  t.equal(owner.merchant_id, 'm1')
})

t.test('holdsUntil: the latest instant the model still allows the pair', async (t) => {
  const clock = new ManualClock()
  const ta = await buildTestApp(t, { clock })
  await onboard(ta, 'm1')
  const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'support' })
  const T1 = clock.now() + HOUR
  const T2 = clock.now() + 2 * HOUR
  const override = async (obj: string, act: string, domain: string, at: number | null, effect: 'grant' | 'deny' = 'grant') => {
    const data = { obj, act, domain, ...(at === null ? {} : { expires_at: new Date(at).toISOString() }) }
    t.equal((await userCommand(ta, effect, staff, data)).statusCode, 200)
  }
  t.equal((await roleGrant(ta, 'support', { obj: 'orders', act: 'read' })).statusCode, 200)
  await override('orders', 'refund', 'm1', T1)
  await override('orders', 'cancel', 'm1', T1)
  await override('orders', 'cancel', 'global', T2)
  await override('payouts', 'read', 'm1', T2)
  await override('payouts', 'read', 'global', T1)
  await override('payouts', 'approve', 'm1', T1)
  await override('payouts', 'approve', 'global', null)
  t.equal((await roleGrant(ta, 'support', { obj: 'permission', act: 'read' })).statusCode, 200)
  await override('permission', 'read', 'm1', T1)
  await override('permission', 'assign', 'm1', T1)
  await override('permission', 'assign', 'global', T2, 'deny')

  const cases: Array<[string, string, string, number | null, string]> = [
    ['orders:read', 'm1', 'global', null, 'a role grant: for good'],
    ['orders:refund', 'm1', 'm1', T1, 'one expiring override'],
    ['orders:refund', 'global', 'global', null, 'not held there at all'],
    ['orders:cancel', 'm1', 'm1', T2, 'two overrides: the later one'],
    ['orders:cancel', 'global', 'global', T2, 'only the global one reaches global'],
    ['payouts:read', 'm1', 'm1', T2, 'the domain’s own, later than global’s'],
    ['payouts:read', 'global', 'global', T1, 'global’s'],
    ['payouts:approve', 'm1', 'm1', null, 'a permanent override besides: for good'],
    ['permission:read', 'm1', 'm1', null, 'a role grant besides: for good'],
    ['permission:assign', 'm1', 'm1', null, 'denied in global: not held'],
  ]
  for (const [pair, domain, , expected, name] of cases) {
    const [obj, act] = pair.split(':') as [string, string]
    t.equal(holdsUntil(ta.service.engine, staff, domain, obj, act), expected, `${pair} in ${domain}: ${name}`)
  }
})
