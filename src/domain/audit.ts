import type { CatalogEvent } from './catalogSync.js'
import { permissionName } from './permissions.js'
import { GLOBAL_DOMAIN, homeDomain, type Account, type PrincipalType } from './principals.js'

/** What one audit entry holds; written in the same transaction as the change it records. */
export const AUDIT_ACTIONS = [
  'grant',
  'revoke',
  'deny',
  'register',
  'onboard',
  'catalog_added',
  'catalog_deactivated',
  'catalog_reactivated',
  'role_changed',
  'deactivated',
  'reactivated',
  'password_changed',
  'password_reset',
  'override_expired',
  'sub_role_created',
  'logged_out',
  'logged_out_everywhere',
] as const
export type AuditAction = (typeof AUDIT_ACTIONS)[number]

export const AUDIT_TARGET_TYPES = ['role', 'user', 'permission'] as const
export type AuditTargetType = (typeof AUDIT_TARGET_TYPES)[number]

/** The actor of a change: an admin account, or the service itself (catalog sync). */
export interface Actor {
  id: string
  type: PrincipalType | 'system'
  ip: string | null
}

export const SYSTEM_ACTOR: Actor = { id: 'system', type: 'system', ip: null }

export interface AuditEntry {
  action: AuditAction
  target_type: AuditTargetType
  target_id: string
  obj: string | null
  act: string | null
  domain: string | null
  /** The merchant whose tenant the entry belongs to; null for platform-wide entries. */
  merchant_id: string | null
  actor: Actor
}

/** Role entries belong to the merchant of their domain; `global` ones to the platform. */
export function tenantOfDomain(domain: string): string | null {
  return domain === GLOBAL_DOMAIN ? null : domain
}

/**
 * The entry builders, one per action: every entry the service writes is
 * made here, so what an entry holds is read in one file. Storage adds the
 * id, the time and the chain hashes (storage/audit.ts); the hash covers every
 * field built here, so a builder's output must not change for an existing action.
 */

/** Whose rule a permission entry records: a role's allow row, or one user's override. */
export type RuleHolder = { kind: 'role'; code: string } | UserHolder

/** A user's override belongs to the user's merchant, whatever domain it is in. */
export interface UserHolder {
  kind: 'user'
  id: string
  merchant_id: string | null
}

/** A rule's pair and the domain it holds in. */
export interface RulePair {
  obj: string
  act: string
  domain: string
}

export const roleHolder = (code: string): RuleHolder => ({ kind: 'role', code })

export const userHolder = (user: Pick<Account, 'id' | 'merchant_id'>): UserHolder => ({ kind: 'user', id: user.id, merchant_id: user.merchant_id })

/** Role rules belong to the tenant of their domain; user overrides to the user's merchant. */
function ruleEntry(action: AuditAction, holder: RuleHolder, pair: RulePair, actor: Actor): AuditEntry {
  const { obj, act, domain } = pair
  if (holder.kind === 'role') {
    return { action, target_type: 'role', target_id: holder.code, obj, act, domain, merchant_id: tenantOfDomain(domain), actor }
  }
  return { action, target_type: 'user', target_id: holder.id, obj, act, domain, merchant_id: holder.merchant_id, actor }
}

/** `grant`: a role's allow row added, or a user's allow override set. */
export function grantEntry(holder: RuleHolder, pair: RulePair, actor: Actor): AuditEntry {
  return ruleEntry('grant', holder, pair, actor)
}

/** `deny`: a user's deny override set; a role's deny row comes only from a policy import. */
export function denyEntry(holder: RuleHolder, pair: RulePair, actor: Actor): AuditEntry {
  return ruleEntry('deny', holder, pair, actor)
}

/** An override set with `effect` is audited as a grant (allow) or a deny. */
export function overrideSetEntry(effect: 'allow' | 'deny', user: UserHolder, pair: RulePair, actor: Actor): AuditEntry {
  return effect === 'allow' ? grantEntry(user, pair, actor) : denyEntry(user, pair, actor)
}

/** `revoke`: a role's allow row removed, or a user's override (allow or deny) removed. */
export function revokeEntry(holder: RuleHolder, pair: RulePair, actor: Actor): AuditEntry {
  return ruleEntry('revoke', holder, pair, actor)
}

/** `override_expired`: an override removed by the service for having expired (by the sweep, or by a write that met it first). */
export function overrideExpiredEntry(user: UserHolder, pair: RulePair): AuditEntry {
  return ruleEntry('override_expired', user, pair, SYSTEM_ACTOR)
}

/** Account entries belong to the account's home domain and its merchant. */
function accountEntry(action: AuditAction, account: AuditedAccount, actor: Actor): AuditEntry {
  return { action, target_type: 'user', target_id: account.id, obj: null, act: null, domain: homeDomain(account), merchant_id: account.merchant_id, actor }
}

type AuditedAccount = Pick<Account, 'id' | 'principal_type' | 'merchant_id'>

/** `register`: an admin account created (by an admin, or by the service at bootstrap). */
export function registerEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('register', account, actor)
}

/** `onboard`: a merchant created with its super_admin (the account). */
export function onboardEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('onboard', account, actor)
}

/** `role_changed`: the account's sub-role replaced. */
export function roleChangedEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('role_changed', account, actor)
}

/** `deactivated`: the account switched off. */
export function deactivatedEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('deactivated', account, actor)
}

/** `reactivated`: the account switched back on. */
export function reactivatedEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('reactivated', account, actor)
}

/** `password_changed`: the account's own password change. */
export function passwordChangedEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('password_changed', account, actor)
}

/** `password_reset`: a new password set from the command line, so by the service. */
export function passwordResetEntry(account: AuditedAccount): AuditEntry {
  return accountEntry('password_reset', account, SYSTEM_ACTOR)
}

/** `logged_out`: the account ended the token it presented. */
export function loggedOutEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('logged_out', account, actor)
}

/** `logged_out_everywhere`: the account ended every token issued to it until then. */
export function loggedOutEverywhereEntry(account: AuditedAccount, actor: Actor): AuditEntry {
  return accountEntry('logged_out_everywhere', account, actor)
}

/** `sub_role_created`: a role entry of the sub-role's domain, so it belongs to that domain's tenant as the role's rules do. */
export function subRoleCreatedEntry(code: string, domain: string, actor: Actor): AuditEntry {
  return { action: 'sub_role_created', target_type: 'role', target_id: code, obj: null, act: null, domain, merchant_id: tenantOfDomain(domain), actor }
}

/** `catalog_added`, `catalog_deactivated`, `catalog_reactivated`: the catalog synced at start-up, platform-wide, by the service. */
export function catalogEntry(event: CatalogEvent, pair: { obj: string; act: string }): AuditEntry {
  return {
    action: event,
    target_type: 'permission',
    target_id: permissionName(pair),
    obj: pair.obj,
    act: pair.act,
    domain: null,
    merchant_id: null,
    actor: SYSTEM_ACTOR,
  }
}
