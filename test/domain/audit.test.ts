/**
 * The audit entry builders, one case per action and target: what each entry
 * holds, read without a database. The chain hash covers every field, so an
 * entry that changed shape would break the chain of every store that has one.
 */
import t from 'tap'
import {
  AUDIT_ACTIONS,
  SYSTEM_ACTOR,
  catalogEntry,
  deactivatedEntry,
  denyEntry,
  loggedOutEntry,
  loggedOutEverywhereEntry,
  grantEntry,
  onboardEntry,
  overrideExpiredEntry,
  overrideSetEntry,
  passwordChangedEntry,
  passwordResetEntry,
  reactivatedEntry,
  registerEntry,
  revokeEntry,
  roleChangedEntry,
  roleHolder,
  subRoleCreatedEntry,
  tenantOfDomain,
  userHolder,
  type Actor,
  type AuditEntry,
} from '../../src/domain/audit.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

const admin: Actor = { id: 'a0000000-0000-4000-8000-000000000001', type: 'system_owner', ip: '203.0.113.7' }
const merchantAdmin: Actor = { id: 'a0000000-0000-4000-8000-000000000002', type: 'merchant', ip: null }
const owner = { id: 'u0000000-0000-4000-8000-000000000003', principal_type: 'system_owner' as const, merchant_id: null }
const clerk = { id: 'u0000000-0000-4000-8000-000000000004', principal_type: 'merchant' as const, merchant_id: 'm1' }
const refundIn = (domain: string) => ({ obj: 'orders', act: 'refund', domain })

/** An entry about a rule: its pair and domain, with the rest given. */
const rule = (
  action: AuditEntry['action'],
  target_type: 'role' | 'user',
  target_id: string,
  domain: string,
  merchant_id: string | null,
  actor: Actor,
): AuditEntry => ({ action, target_type, target_id, obj: 'orders', act: 'refund', domain, merchant_id, actor })

/** An entry about an account: no pair. */
const account = (action: AuditEntry['action'], target_id: string, domain: string, merchant_id: string | null, actor: Actor): AuditEntry => ({
  action,
  target_type: 'user',
  target_id,
  obj: null,
  act: null,
  domain,
  merchant_id,
  actor,
})

const cases: Array<[string, AuditEntry, AuditEntry]> = [
  ['grant to a role in global: a platform entry', grantEntry(roleHolder('clerk'), refundIn('global'), admin), rule('grant', 'role', 'clerk', 'global', null, admin)],
  ['grant to a role in a merchant: that merchant\'s entry', grantEntry(roleHolder('clerk'), refundIn('m1'), merchantAdmin), rule('grant', 'role', 'clerk', 'm1', 'm1', merchantAdmin)],
  ['revoke from a role', revokeEntry(roleHolder('clerk'), refundIn('m2'), admin), rule('revoke', 'role', 'clerk', 'm2', 'm2', admin)],
  ['allow override: a grant, the user\'s merchant\'s', grantEntry(userHolder(clerk), refundIn('m1'), admin), rule('grant', 'user', clerk.id, 'm1', 'm1', admin)],
  ['deny override', denyEntry(userHolder(clerk), refundIn('m1'), admin), rule('deny', 'user', clerk.id, 'm1', 'm1', admin)],
  ['a role\'s deny row (from a policy import): the domain\'s tenant', denyEntry(roleHolder('clerk'), refundIn('m2'), SYSTEM_ACTOR), rule('deny', 'role', 'clerk', 'm2', 'm2', SYSTEM_ACTOR)],
  ['override set with allow is a grant', overrideSetEntry('allow', userHolder(clerk), refundIn('m1'), admin), rule('grant', 'user', clerk.id, 'm1', 'm1', admin)],
  ['override set with deny is a deny', overrideSetEntry('deny', userHolder(clerk), refundIn('m1'), admin), rule('deny', 'user', clerk.id, 'm1', 'm1', admin)],
  // A system owner's override in a merchant's domain stays a platform entry: it is the user's, not the domain's.
  ['a system owner\'s override in a merchant domain', grantEntry(userHolder(owner), refundIn('m1'), admin), rule('grant', 'user', owner.id, 'm1', null, admin)],
  ['revoke of an override', revokeEntry(userHolder(clerk), refundIn('m1'), merchantAdmin), rule('revoke', 'user', clerk.id, 'm1', 'm1', merchantAdmin)],
  ['an expired override: by the service', overrideExpiredEntry(userHolder(clerk), refundIn('m1')), rule('override_expired', 'user', clerk.id, 'm1', 'm1', SYSTEM_ACTOR)],
  ['register of a system owner', registerEntry(owner, admin), account('register', owner.id, 'global', null, admin)],
  ['register at bootstrap', registerEntry(owner, SYSTEM_ACTOR), account('register', owner.id, 'global', null, SYSTEM_ACTOR)],
  ['register of a merchant admin', registerEntry(clerk, merchantAdmin), account('register', clerk.id, 'm1', 'm1', merchantAdmin)],
  ['onboard: the merchant\'s super_admin', onboardEntry(clerk, admin), account('onboard', clerk.id, 'm1', 'm1', admin)],
  ['role_changed', roleChangedEntry(clerk, admin), account('role_changed', clerk.id, 'm1', 'm1', admin)],
  ['deactivated', deactivatedEntry(owner, admin), account('deactivated', owner.id, 'global', null, admin)],
  ['reactivated', reactivatedEntry(clerk, merchantAdmin), account('reactivated', clerk.id, 'm1', 'm1', merchantAdmin)],
  ['password_changed: by the account itself', passwordChangedEntry(clerk, merchantAdmin), account('password_changed', clerk.id, 'm1', 'm1', merchantAdmin)],
  ['logged_out: by the account itself', loggedOutEntry(clerk, merchantAdmin), account('logged_out', clerk.id, 'm1', 'm1', merchantAdmin)],
  ['logged_out_everywhere', loggedOutEverywhereEntry(owner, admin), account('logged_out_everywhere', owner.id, 'global', null, admin)],
  ['password_reset: by the service', passwordResetEntry(owner), account('password_reset', owner.id, 'global', null, SYSTEM_ACTOR)],
  [
    'sub_role_created by a merchant admin: in its merchant',
    subRoleCreatedEntry('picker', 'm1', merchantAdmin),
    { action: 'sub_role_created', target_type: 'role', target_id: 'picker', obj: null, act: null, domain: 'm1', merchant_id: 'm1', actor: merchantAdmin },
  ],
  [
    'sub_role_created by a system owner: in global',
    subRoleCreatedEntry('auditor', 'global', admin),
    { action: 'sub_role_created', target_type: 'role', target_id: 'auditor', obj: null, act: null, domain: 'global', merchant_id: null, actor: admin },
  ],
  [
    'sub_role_created by a system owner in a merchant: that merchant\'s entry, as its rules are',
    subRoleCreatedEntry('auditor', 'm1', admin),
    { action: 'sub_role_created', target_type: 'role', target_id: 'auditor', obj: null, act: null, domain: 'm1', merchant_id: 'm1', actor: admin },
  ],
  ...(['catalog_added', 'catalog_deactivated', 'catalog_reactivated'] as const).map((event): [string, AuditEntry, AuditEntry] => [
    `${event}: platform-wide, by the service`,
    catalogEntry(event, { obj: 'payouts', act: 'approve' }),
    { action: event, target_type: 'permission', target_id: 'payouts:approve', obj: 'payouts', act: 'approve', domain: null, merchant_id: null, actor: SYSTEM_ACTOR },
  ]),
]

t.test('each builder makes the entry its action records', async (t) => {
  for (const [name, built, expected] of cases) t.strictSame(built, expected, name)
})

t.test('every audit action has a builder in the table', async (t) => {
  const covered = new Set(cases.map(([, built]) => built.action))
  t.strictSame([...AUDIT_ACTIONS].filter((action) => !covered.has(action)), [])
})

t.test('tenantOfDomain: global is the platform\'s, any other domain its merchant\'s', async (t) => {
  const table: Array<[string, string | null]> = [
    ['global', null],
    ['m1', 'm1'],
    ['acme-eu', 'acme-eu'],
  ]
  for (const [domain, expected] of table) t.equal(tenantOfDomain(domain), expected, domain)
})
