/**
 * The grant rules as plain functions, case by case: who may grant, deny or
 * revoke a pair and for how long, and whose account a caller may change.
 */
import t from 'tap'
import {
  assertInCatalog,
  assertMayAssignSubRole,
  assertMayChangeAccount,
  assertMayGrant,
  assertMayRevoke,
  assertScopeAllows,
  liftedDeny,
  outlasts,
  type GrantCheck,
  type OverrideTerm,
} from '../../src/domain/grantRules.js'
import { outcome } from '../support/ruleOutcome.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

const T = Date.parse('2030-01-01T12:00:00Z')

const base: GrantCheck = {
  active: true,
  scope: 'any',
  callerIsRoot: false,
  callerHolds: true,
  callerHoldsUntil: null,
  expiresAt: null,
  targetIsRoot: false,
  targetIsMerchantUser: false,
  targetRole: 'clerk',
  obj: 'orders',
  act: 'refund',
  domain: 'm1',
}

t.test('outlasts: a row outlasts a holding that ends before the row does', async (t) => {
  const cases: Array<[string, number | null, number | null, boolean]> = [
    ['permanent row, permanent holding', null, null, false],
    ['expiring row, permanent holding', T, null, false],
    ['permanent row, holding until T', null, T, true],
    ['row until T, holding until T', T, T, false],
    ['row until just before T', T - 1, T, false],
    ['row until just after T', T + 1, T, true],
  ]
  for (const [name, expiresAt, holdsUntil, expected] of cases) t.equal(outlasts(expiresAt, holdsUntil), expected, name)
})

t.test('assertMayGrant: what a caller holds until T it passes on until T at most', async (t) => {
  const cases: Array<[string, Partial<GrantCheck>, string]> = [
    ['holds it for good, grants for good', {}, 'ok'],
    ['holds it for good, grants until T', { expiresAt: T }, 'ok'],
    ['does not hold it', { callerHolds: false }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, grants for good (or to a role)', { callerHoldsUntil: T }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, grants until a millisecond after', { callerHoldsUntil: T, expiresAt: T + 1 }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, grants until T', { callerHoldsUntil: T, expiresAt: T }, 'ok'],
    ['holds it until T, grants until before T', { callerHoldsUntil: T, expiresAt: T - 60_000 }, 'ok'],
    ['root is held to no term', { callerIsRoot: true, callerHolds: true, callerHoldsUntil: T }, 'ok'],
    ['root need not hold the pair', { callerIsRoot: true, callerHolds: false }, 'ok'],
    ['a pair outside the catalog comes first', { active: false, callerHolds: false }, 'PERMISSION_NOT_IN_CATALOG'],
    ['a root target, even for root', { callerIsRoot: true, targetIsRoot: true }, 'ROOT_ROLE_NOT_GRANTABLE'],
    ['holds it until T, replaces a permanent deny with an allow until T', { callerHoldsUntil: T, expiresAt: T, liftedDenyUntil: null }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, replaces a deny until after T with a deny until T', { callerHoldsUntil: T, expiresAt: T, liftedDenyUntil: T + 1 }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, replaces a deny ending by T', { callerHoldsUntil: T, expiresAt: T, liftedDenyUntil: T }, 'ok'],
    ['holds it for good, replaces a permanent deny', { liftedDenyUntil: null }, 'ok'],
    ['root replaces any deny', { callerIsRoot: true, callerHoldsUntil: T, liftedDenyUntil: null }, 'ok'],
    ['a platform pair in a merchant domain, even for root', { callerIsRoot: true, scope: 'platform' }, 'PLATFORM_PERMISSION_IN_MERCHANT'],
    ['a platform pair before the root target', { scope: 'platform', targetIsRoot: true }, 'PLATFORM_PERMISSION_IN_MERCHANT'],
    ['a platform pair in global', { scope: 'platform', domain: 'global' }, 'ok'],
  ]
  for (const [name, change, expected] of cases) t.equal(outcome(() => assertMayGrant({ ...base, ...change })), expected, name)
})

t.test('assertScopeAllows: a platform pair only in global and never for a merchant user', async (t) => {
  const cases: Array<[string, Pick<GrantCheck, 'scope' | 'domain' | 'targetIsMerchantUser'>, string]> = [
    ['platform, global, a role or a system-owner user', { scope: 'platform', domain: 'global', targetIsMerchantUser: false }, 'ok'],
    ['platform, a merchant domain', { scope: 'platform', domain: 'm1', targetIsMerchantUser: false }, 'PLATFORM_PERMISSION_IN_MERCHANT'],
    ['platform, a merchant user', { scope: 'platform', domain: 'm1', targetIsMerchantUser: true }, 'PLATFORM_PERMISSION_IN_MERCHANT'],
    ['platform, a merchant user, global asked', { scope: 'platform', domain: 'global', targetIsMerchantUser: true }, 'PLATFORM_PERMISSION_IN_MERCHANT'],
    ['any, a merchant user', { scope: 'any', domain: 'm1', targetIsMerchantUser: true }, 'ok'],
    ['any, a merchant domain', { scope: 'any', domain: 'm1', targetIsMerchantUser: false }, 'ok'],
  ]
  for (const [name, check, expected] of cases) t.equal(outcome(() => assertScopeAllows({ ...check, obj: 'merchant', act: 'onboard' })), expected, name)
  t.throws(
    () => assertScopeAllows({ scope: 'platform', domain: 'm1', targetIsMerchantUser: true, obj: 'merchant', act: 'onboard' }),
    { code: 'PLATFORM_PERMISSION_IN_MERCHANT', params: { obj: 'merchant', act: 'onboard', domain: 'm1' } },
    'the refusal names the pair and the domain',
  )
})

t.test('liftedDeny: the deny an override change takes away, by when it would have ended', async (t) => {
  const allow = (expiresAt: number | null = null): OverrideTerm => ({ effect: 'allow', expiresAt })
  const deny = (expiresAt: number | null = null): OverrideTerm => ({ effect: 'deny', expiresAt })
  const cases: Array<[string, OverrideTerm | null, OverrideTerm | null, number | null | undefined]> = [
    ['no override, a grant', null, allow(), undefined],
    ['an allow revoked', allow(), null, undefined],
    ['an allow turned into a deny', allow(T), deny(), undefined],
    ['a permanent deny revoked', deny(), null, null],
    ['a deny until T revoked', deny(T), null, T],
    ['a permanent deny turned into an allow', deny(), allow(T), null],
    ['a permanent deny shortened to T', deny(), deny(T), null],
    ['a deny until T shortened', deny(T), deny(T - 1), T],
    ['a deny until T kept until T', deny(T), deny(T), undefined],
    ['a deny until T made longer', deny(T), deny(T + 1), undefined],
    ['a deny until T made permanent', deny(T), deny(), undefined],
  ]
  for (const [name, current, next, expected] of cases) t.equal(liftedDeny(current, next), expected, name)
})

t.test('assertMayRevoke: holding the pair now is enough to take an allow away; a deny is lifted within the holding term', async (t) => {
  const cases: Array<[string, Partial<GrantCheck>, string]> = [
    ['holds it', {}, 'ok'],
    ['holds it until T, takes an allow away', { callerHoldsUntil: T }, 'ok'],
    ['does not hold it', { callerHolds: false }, 'PRIVILEGE_ESCALATION'],
    ['root', { callerIsRoot: true, callerHolds: false }, 'ok'],
    ['not in the catalog', { active: false }, 'PERMISSION_NOT_IN_CATALOG'],
    ['holds it for good, lifts a permanent deny', { liftedDenyUntil: null }, 'ok'],
    ['holds it until T, lifts a permanent deny', { callerHoldsUntil: T, liftedDenyUntil: null }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, lifts a deny until after T', { callerHoldsUntil: T, liftedDenyUntil: T + 1 }, 'PRIVILEGE_ESCALATION'],
    ['holds it until T, lifts a deny ending at T', { callerHoldsUntil: T, liftedDenyUntil: T }, 'ok'],
    ['holds it until T, lifts a deny ending before T', { callerHoldsUntil: T, liftedDenyUntil: T - 1 }, 'ok'],
    ['root lifts any deny', { callerIsRoot: true, callerHoldsUntil: T, liftedDenyUntil: null }, 'ok'],
    ['a platform pair in a merchant domain: rows that never counted may go', { scope: 'platform' }, 'ok'],
  ]
  for (const [name, change, expected] of cases) t.equal(outcome(() => assertMayRevoke({ ...base, ...change })), expected, name)
})

t.test('assertMayChangeAccount: a non-root caller changes only accounts it holds everything of', async (t) => {
  type Check = { callerIsRoot: boolean; targetRoot?: string | null; heldByTargetOnly: string[]; newSubRoleBeyondCaller: string[] }
  const cases: Array<[string, Check, string]> = [
    ['a peer holding no more than the caller, to a sub-role it covers', { callerIsRoot: false, heldByTargetOnly: [], newSubRoleBeyondCaller: [] }, 'ok'],
    ['a peer holding a pair the caller lacks', { callerIsRoot: false, heldByTargetOnly: ['payouts:approve'], newSubRoleBeyondCaller: [] }, 'ACCOUNT_BEYOND_CALLER'],
    ['a root account', { callerIsRoot: false, targetRoot: 'super_admin', heldByTargetOnly: [], newSubRoleBeyondCaller: [] }, 'ACCOUNT_BEYOND_CALLER'],
    ['a new sub-role holding a pair the caller lacks', { callerIsRoot: false, heldByTargetOnly: [], newSubRoleBeyondCaller: ['payouts:approve'] }, 'PRIVILEGE_ESCALATION'],
    ['both: the account comes first', { callerIsRoot: false, heldByTargetOnly: ['orders:read'], newSubRoleBeyondCaller: ['payouts:approve'] }, 'ACCOUNT_BEYOND_CALLER'],
    ['root changes anyone', { callerIsRoot: true, targetRoot: 'super_admin', heldByTargetOnly: ['payouts:approve'], newSubRoleBeyondCaller: ['reports:read'] }, 'ok'],
  ]
  for (const [name, check, expected] of cases) t.equal(outcome(() => assertMayChangeAccount({ ...check, domain: 'm1' })), expected, name)
})

t.test('assertInCatalog: only active catalog pairs are granted, denied or revoked', async (t) => {
  const cases: Array<[string, boolean, string]> = [
    ['active', true, 'ok'],
    ['inactive or unknown', false, 'PERMISSION_NOT_IN_CATALOG'],
  ]
  for (const [name, active, expected] of cases) t.equal(outcome(() => assertInCatalog({ active, obj: 'orders', act: 'refund' })), expected, name)
})

t.test('assertMayAssignSubRole: a non-root caller gives only a sub-role holding nothing beyond its own', async (t) => {
  const cases: Array<[string, boolean, string[], string]> = [
    ['nothing beyond the caller', false, [], 'ok'],
    ['a pair beyond the caller', false, ['payouts:approve'], 'PRIVILEGE_ESCALATION'],
    ['root gives any sub-role', true, ['payouts:approve'], 'ok'],
  ]
  for (const [name, callerIsRoot, beyondCaller, expected] of cases) {
    t.equal(outcome(() => assertMayAssignSubRole({ callerIsRoot, beyondCaller, domain: 'm1' })), expected, name)
  }
})

t.test('a refusal names the domain it is about', async (t) => {
  const refusals: Array<[string, () => void]> = [
    ['grant', () => assertMayGrant({ ...base, callerHolds: false })],
    ['revoke', () => assertMayRevoke({ ...base, callerHolds: false })],
    ['assign', () => assertMayAssignSubRole({ callerIsRoot: false, beyondCaller: ['orders:refund'], domain: 'm1' })],
    ['change to a sub-role beyond the caller', () => assertMayChangeAccount({ callerIsRoot: false, heldByTargetOnly: [], newSubRoleBeyondCaller: ['orders:refund'], domain: 'm1' })],
  ]
  for (const [name, rule] of refusals) t.throws(rule, { code: 'PRIVILEGE_ESCALATION', params: { domain: 'm1' } }, name)
})

t.test('a peer-rule refusal names the first thing the caller lacks', async (t) => {
  const cases: Array<[string, string[], string | null, string]> = [
    ['the first pair the account holds and the caller does not', ['orders:refund', 'payouts:approve'], null, 'orders:refund'],
    ['a root account: its pairs first', ['payouts:approve'], 'super_admin', 'payouts:approve'],
    ['a root account whose every pair the caller holds: its root sub-role', [], 'super_admin', 'super_admin'],
  ]
  for (const [name, heldByTargetOnly, targetRoot, permission] of cases) {
    t.throws(
      () => assertMayChangeAccount({ callerIsRoot: false, targetRoot, heldByTargetOnly, newSubRoleBeyondCaller: [], domain: 'm1' }),
      { code: 'ACCOUNT_BEYOND_CALLER', params: { permission, domain: 'm1' } },
      name,
    )
  }
})
