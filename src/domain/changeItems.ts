import type { AuditAction, AuditEntry } from './audit.js'
import type { StoreChange } from './changes.js'
import { GLOBAL_DOMAIN } from './principals.js'

/** What the change stream lists: everything a decision depends on, and nothing else (no passwords, logouts, labels). */
export const CHANGE_KINDS = [
  'role_grant',
  'role_deny',
  'role_revoke',
  'user_grant',
  'user_deny',
  'user_revoke',
  'override_expired',
  'assignment',
  'account_status',
  'catalog',
] as const
export type ChangeKind = (typeof CHANGE_KINDS)[number]

/** `account_status` and `catalog` items say which of their events happened. */
export const CHANGE_EVENTS = ['added', 'deactivated', 'reactivated'] as const
export type ChangeEvent = (typeof CHANGE_EVENTS)[number]

/** One change as the stream lists it, before storage numbers it (revision, index) and times it. */
export interface ChangeItem {
  kind: ChangeKind
  domain: string
  /** The tenant the change belongs to, as its audit row says (null: platform-wide); never listed, only filtered on. */
  merchant_id: string | null
  sub_role?: string
  user_id?: string
  obj?: string
  act?: string
  effect?: 'allow' | 'deny'
  expires_at?: string
  event?: ChangeEvent
  actor_id: string
}

const RULE_KINDS: Partial<Record<AuditAction, { role: ChangeKind; user: ChangeKind }>> = {
  grant: { role: 'role_grant', user: 'user_grant' },
  deny: { role: 'role_deny', user: 'user_deny' },
  revoke: { role: 'role_revoke', user: 'user_revoke' },
  override_expired: { role: 'override_expired', user: 'override_expired' },
}

/** The p row an audited rule change added or removed: its effect and, for an override that expires, its instant. */
function ruleRow(changes: readonly StoreChange[], entry: AuditEntry, op: 'add' | 'remove'): { effect?: 'allow' | 'deny'; expires_at?: string } {
  for (const change of changes) {
    if (change.kind !== 'rule' || change.ptype !== 'p' || change.op !== op) continue
    const [subject, domain, obj, act, effect] = change.values
    if (subject !== entry.target_id || domain !== entry.domain || obj !== entry.obj || act !== entry.act) continue
    return {
      ...(effect === 'allow' || effect === 'deny' ? { effect } : {}),
      ...(change.expires_at !== undefined && change.expires_at !== null ? { expires_at: change.expires_at } : {}),
    }
  }
  return {}
}

/** The sub-role a registration, onboarding or sub-role change gave the user: its new `g` row. */
function assignedSubRole(changes: readonly StoreChange[], userId: string): string | undefined {
  for (const change of changes) {
    if (change.kind === 'rule' && change.ptype === 'g' && change.op === 'add' && change.values[0] === userId) return change.values[1]
  }
  return undefined
}

function itemOf(entry: AuditEntry, changes: readonly StoreChange[]): ChangeItem | null {
  const base = { domain: entry.domain ?? GLOBAL_DOMAIN, merchant_id: entry.merchant_id, actor_id: entry.actor.id }
  const rule = RULE_KINDS[entry.action]
  if (rule !== undefined && entry.obj !== null && entry.act !== null) {
    const holder = entry.target_type === 'role' ? { sub_role: entry.target_id } : { user_id: entry.target_id }
    const row = ruleRow(changes, entry, entry.action === 'grant' || entry.action === 'deny' ? 'add' : 'remove')
    return { kind: rule[entry.target_type === 'role' ? 'role' : 'user'], ...base, ...holder, obj: entry.obj, act: entry.act, ...row }
  }
  switch (entry.action) {
    case 'register':
    case 'onboard':
    case 'role_changed': {
      const subRole = assignedSubRole(changes, entry.target_id)
      return { kind: 'assignment', ...base, user_id: entry.target_id, ...(subRole !== undefined ? { sub_role: subRole } : {}) }
    }
    case 'deactivated':
    case 'reactivated':
      return { kind: 'account_status', ...base, user_id: entry.target_id, event: entry.action }
    case 'catalog_added':
    case 'catalog_deactivated':
    case 'catalog_reactivated':
      if (entry.obj === null || entry.act === null) return null
      return { kind: 'catalog', ...base, obj: entry.obj, act: entry.act, event: CATALOG_EVENTS[entry.action] }
    default:
      return null
  }
}

const CATALOG_EVENTS = { catalog_added: 'added', catalog_deactivated: 'deactivated', catalog_reactivated: 'reactivated' } as const

/**
 * The items one write lists, in the order of its audit entries: each audited
 * change a decision depends on becomes one item, with what the audit row does
 * not hold (an override's effect and expiry, the sub-role assigned) read from
 * the write's own changes.
 */
export function changeItemsOf(audit: readonly AuditEntry[], changes: readonly StoreChange[]): ChangeItem[] {
  const items: ChangeItem[] = []
  for (const entry of audit) {
    const item = itemOf(entry, changes)
    if (item !== null) items.push(item)
  }
  return items
}

/** The audience every caller shares: platform-wide changes that name no account. */
export const EVERY_TENANT = '*'

/**
 * Who may see an item besides system owners, stored with it so a listing
 * filters on one column: its merchant for a merchant's change; everyone for
 * a platform-wide change that names no account (role rules in `global`, the
 * catalog); no merchant (null) for a staff account's change. So a merchant
 * sees its own tenant and `global`, never another merchant's nor staff's.
 */
export function audienceOf(item: Pick<ChangeItem, 'merchant_id' | 'user_id'>): string | null {
  if (item.merchant_id !== null) return item.merchant_id
  return item.user_id === undefined ? EVERY_TENANT : null
}
