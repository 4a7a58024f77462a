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
  outlasts,
  type GrantCheck,
} from '../../src/domain/grantRules.js'
import { outcome } from '../support/ruleOutcome.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

const T = Date.parse('2030-01-01T12:00:00Z')

const base: GrantCheck = {
  active: true,
  callerIsRoot: false,
  callerHolds: true,
  callerHoldsUntil: null,
  expiresAt: null,
  targetIsRoot: false,
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
  ]
  for (const [name, change, expected] of cases) t.equal(outcome(() => assertMayGrant({ ...base, ...change })), expected, name)
})

t.test('assertMayRevoke: holding the pair now is enough, whatever its term', async (t) => {
  const cases: Array<[string, Partial<GrantCheck>, string]> = [
    ['holds it', {}, 'ok'],
    ['holds it until T', { callerHoldsUntil: T }, 'ok'],
    ['does not hold it', { callerHolds: false }, 'PRIVILEGE_ESCALATION'],
    ['root', { callerIsRoot: true, callerHolds: false }, 'ok'],
    ['not in the catalog', { active: false }, 'PERMISSION_NOT_IN_CATALOG'],
  ]
  for (const [name, change, expected] of cases) t.equal(outcome(() => assertMayRevoke({ ...base, ...change })), expected, name)
})

t.test('assertMayChangeAccount: a non-root caller changes only accounts it holds everything of', async (t) => {
  const cases: Array<[string, { callerIsRoot: boolean; heldByTargetOnly: string[]; newSubRoleBeyondCaller: string[] }, string]> = [
    ['a peer holding no more than the caller, to a sub-role it covers', { callerIsRoot: false, heldByTargetOnly: [], newSubRoleBeyondCaller: [] }, 'ok'],
    ['a peer holding a pair the caller lacks', { callerIsRoot: false, heldByTargetOnly: ['payouts:approve'], newSubRoleBeyondCaller: [] }, 'PRIVILEGE_ESCALATION'],
    ['a new sub-role holding a pair the caller lacks', { callerIsRoot: false, heldByTargetOnly: [], newSubRoleBeyondCaller: ['payouts:approve'] }, 'PRIVILEGE_ESCALATION'],
    ['root changes anyone', { callerIsRoot: true, heldByTargetOnly: ['payouts:approve'], newSubRoleBeyondCaller: ['reports:read'] }, 'ok'],
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
    ['change', () => assertMayChangeAccount({ callerIsRoot: false, heldByTargetOnly: ['orders:refund'], newSubRoleBeyondCaller: [], domain: 'm1' })],
  ]
  for (const [name, rule] of refusals) t.throws(rule, { code: 'PRIVILEGE_ESCALATION', params: { domain: 'm1' } }, name)
})
