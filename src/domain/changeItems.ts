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

/** What an audited rule change added or removed: its effect and, for an override that expires, its instant. */
type RuleRow = { effect?: 'allow' | 'deny'; expires_at?: string }

const ruleKey = (op: 'add' | 'remove', subject: string, domain: string, obj: string, act: string): string => `${op}\u0000${subject}\u0000${domain}\u0000${obj}\u0000${act}`

/**
 * One write's changes, looked up by what an audit entry names: a write may
 * hold a million rows (an import), so each entry finds its row by key, not
 * by reading the whole list again. The first matching change wins.
 */
class WriteChanges {
  private rules: Map<string, RuleRow> | null = null
  private assignments: Map<string, string> | null = null

  constructor(private readonly changes: readonly StoreChange[]) {}

  /** The p row an audited rule change added or removed. */
  ruleRow(entry: AuditEntry, op: 'add' | 'remove'): RuleRow {
    if (entry.domain === null || entry.obj === null || entry.act === null) return {}
    if (this.rules === null) {
      this.rules = new Map()
      for (const change of this.changes) {
        if (change.kind !== 'rule' || change.ptype !== 'p') continue
        const [subject, domain, obj, act, effect] = change.values
        if (subject === undefined || domain === undefined || obj === undefined || act === undefined) continue
        const key = ruleKey(change.op, subject, domain, obj, act)
        if (this.rules.has(key)) continue
        this.rules.set(key, {
          ...(effect === 'allow' || effect === 'deny' ? { effect } : {}),
          ...(change.expires_at !== undefined && change.expires_at !== null ? { expires_at: change.expires_at } : {}),
        })
      }
    }
    return this.rules.get(ruleKey(op, entry.target_id, entry.domain, entry.obj, entry.act)) ?? {}
  }

  /** The sub-role a registration, onboarding or sub-role change gave the user: its new `g` row. */
  assignedSubRole(userId: string): string | undefined {
    if (this.assignments === null) {
      this.assignments = new Map()
      for (const change of this.changes) {
        if (change.kind !== 'rule' || change.ptype !== 'g' || change.op !== 'add') continue
        const [user, subRole] = change.values
        if (user !== undefined && subRole !== undefined && !this.assignments.has(user)) this.assignments.set(user, subRole)
      }
    }
    return this.assignments.get(userId)
  }
}

function itemOf(entry: AuditEntry, changes: WriteChanges): ChangeItem | null {
  const base = { domain: entry.domain ?? GLOBAL_DOMAIN, merchant_id: entry.merchant_id, actor_id: entry.actor.id }
  const rule = RULE_KINDS[entry.action]
  if (rule !== undefined && entry.obj !== null && entry.act !== null) {
    const holder = entry.target_type === 'role' ? { sub_role: entry.target_id } : { user_id: entry.target_id }
    const row = changes.ruleRow(entry, entry.action === 'grant' || entry.action === 'deny' ? 'add' : 'remove')
    return { kind: rule[entry.target_type === 'role' ? 'role' : 'user'], ...base, ...holder, obj: entry.obj, act: entry.act, ...row }
  }
  switch (entry.action) {
    case 'register':
    case 'onboard':
    case 'role_changed': {
      const subRole = changes.assignedSubRole(entry.target_id)
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
  const written = new WriteChanges(changes)
  for (const entry of audit) {
    const item = itemOf(entry, written)
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
