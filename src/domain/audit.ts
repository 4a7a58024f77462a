import type { PrincipalType } from './principals.js'

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
  return domain === 'global' ? null : domain
}
