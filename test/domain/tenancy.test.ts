/**
 * Tenancy as plain functions, case by case: which domain a request is about,
 * whom a caller reaches, where a user's overrides may live.
 */
import t from 'tap'
import { canReachAccount, homeDomain, type Account } from '../../src/domain/principals.js'
import { assertOverrideDomain, assertReachable, forcedDomain, roleDomain, userDomain } from '../../src/domain/tenancy.js'
import { outcome } from '../support/ruleOutcome.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

type Tenant = Pick<Account, 'principal_type' | 'merchant_id'>
const owner: Tenant = { principal_type: 'system_owner', merchant_id: null }
const m1: Tenant = { principal_type: 'merchant', merchant_id: 'm1' }
const m2: Tenant = { principal_type: 'merchant', merchant_id: 'm2' }

function account(tenant: Tenant): Account {
  return {
    id: 'u0000000-0000-4000-8000-000000000001',
    email: 'someone@example.com',
    name: 'Someone',
    phone: null,
    ...tenant,
    sub_role_code: 'clerk',
    parent_role: null,
    created_by: null,
    created_at: new Date(0),
    status: 'active',
    credentials_version: 1,
    must_change_password: false,
    credentials_changed_at: null,
  }
}

t.test('homeDomain: a merchant user\'s merchant, global for system owners', async (t) => {
  const cases: Array<[string, Tenant, string]> = [
    ['system owner', owner, 'global'],
    ['merchant user', m1, 'm1'],
    ['a merchant principal without a merchant falls back to global', { principal_type: 'merchant', merchant_id: null }, 'global'],
  ]
  for (const [name, tenant, expected] of cases) t.equal(homeDomain(tenant), expected, name)
})

t.test('forcedDomain: a merchant caller is forced to its merchant, whatever it asks', async (t) => {
  const cases: Array<[string, Tenant, string | undefined, string]> = [
    ['merchant asking nothing', m1, undefined, 'm1'],
    ['merchant asking another merchant', m1, 'm2', 'm1'],
    ['merchant asking global', m1, 'global', 'm1'],
    ['system owner asking a merchant', owner, 'm2', 'm2'],
    ['system owner asking nothing: the fallback', owner, undefined, 'fallback'],
  ]
  for (const [name, caller, requested, expected] of cases) t.equal(forcedDomain(caller, requested, 'fallback'), expected, name)
})

t.test('roleDomain and userDomain: their defaults when nothing is asked', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['role endpoint, system owner: global', roleDomain(owner, undefined), 'global'],
    ['role endpoint, merchant: its merchant', roleDomain(m1, 'global'), 'm1'],
    ['user endpoint, system owner about a merchant user: the user\'s home', userDomain(owner, m2, undefined), 'm2'],
    ['user endpoint, system owner about a system owner: global', userDomain(owner, owner, undefined), 'global'],
    ['user endpoint, system owner asking a domain', userDomain(owner, owner, 'm1'), 'm1'],
    ['user endpoint, merchant: its merchant, whatever it asks', userDomain(m1, m1, 'm2'), 'm1'],
  ]
  for (const [name, actual, expected] of cases) t.equal(actual, expected, name)
})

t.test('canReachAccount and assertReachable: a merchant reaches its own merchant\'s users only', async (t) => {
  const cases: Array<[string, Tenant, Tenant | null, boolean]> = [
    ['system owner reaches a system owner', owner, owner, true],
    ['system owner reaches any merchant user', owner, m2, true],
    ['merchant reaches its own users', m1, m1, true],
    ['merchant does not reach another merchant', m1, m2, false],
    ['merchant does not reach a system owner', m1, owner, false],
    ['nobody reaches a user that does not exist', owner, null, false],
  ]
  for (const [name, caller, target, reaches] of cases) {
    if (target !== null) t.equal(canReachAccount(caller, target), reaches, `canReach: ${name}`)
    // Out of reach and missing answer alike, so a caller cannot probe other tenants' ids.
    t.equal(outcome(() => assertReachable(caller, target === null ? null : account(target))), reaches ? 'ok' : 'USER_NOT_FOUND', `assertReachable: ${name}`)
  }
})

t.test('assertOverrideDomain: a merchant user\'s overrides live in its merchant only', async (t) => {
  const cases: Array<[string, Tenant, string, string]> = [
    ['merchant user in its merchant', m1, 'm1', 'ok'],
    ['merchant user in another merchant', m1, 'm2', 'OVERRIDE_OUTSIDE_HOME_DOMAIN'],
    ['merchant user in global', m1, 'global', 'OVERRIDE_OUTSIDE_HOME_DOMAIN'],
    ['system owner in global', owner, 'global', 'ok'],
    ['system owner in a merchant', owner, 'm1', 'ok'],
  ]
  for (const [name, target, domain, expected] of cases) t.equal(outcome(() => assertOverrideDomain(target, domain)), expected, name)
  t.throws(() => assertOverrideDomain(m1, 'm2'), { code: 'OVERRIDE_OUTSIDE_HOME_DOMAIN', params: { home: 'm1' } }, 'the refusal names the home domain')
})
