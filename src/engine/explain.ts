/** Why a decision came out as it did: the kinds a check with `explain=true` answers. */
export const REASON_KINDS = ['root', 'role', 'user_allow', 'user_deny', 'role_deny', 'none', 'not_in_catalog', 'outside_home_domain'] as const
export type ReasonKind = (typeof REASON_KINDS)[number]

export interface Reason {
  kind: ReasonKind
  /** The Casbin p row that decided (sub, dom, obj, act, eft), when one did. */
  rule?: string[]
}

export interface Explanation {
  allowed: boolean
  reason: Reason
}

/** The kinds that go with `allowed: true`; every other kind goes with false. */
export const ALLOWING_KINDS: ReadonlySet<ReasonKind> = new Set(['root', 'role', 'user_allow'])

/**
 * The reason of a model's answer from the row that decided it: the user's
 * own row (its id as the subject) is an override, any other a role's; an
 * allowed answer is an allow, a refused one a deny when the row's effect is
 * one, else nothing held the pair.
 */
export function explained(subjectId: string, allowed: boolean, rule: readonly string[] | null): Explanation {
  const own = rule !== null && rule[0] === subjectId
  const withRule = (kind: ReasonKind): Explanation => ({ allowed, reason: rule === null ? { kind } : { kind, rule: [...rule] } })
  if (allowed) return withRule(own ? 'user_allow' : 'role')
  if (rule !== null && rule[rule.length - 1] === 'deny') return withRule(own ? 'user_deny' : 'role_deny')
  return { allowed, reason: { kind: 'none' } }
}
