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
 * A decision's reason as the evaluation that answered hands it back: a small
 * integer, so the hot path allocates nothing, turned into words (and the
 * deciding row into text) only when asked. The allowing codes come first:
 * a decision allows exactly when its code is below DENIED_FROM.
 */
export const REASON = {
  root: 0,
  role: 1,
  user_allow: 2,
  user_deny: 3,
  role_deny: 4,
  none: 5,
  not_in_catalog: 6,
  outside_home_domain: 7,
  /** A deactivated account holds nothing (the decision log says so; an explanation says `none`). */
  deactivated: 8,
} as const
export type ReasonCode = (typeof REASON)[keyof typeof REASON]
const DENIED_FROM = REASON.user_deny

export const allows = (code: ReasonCode): boolean => code < DENIED_FROM

const NAMES_A_ROW: ReadonlySet<ReasonCode> = new Set([REASON.role, REASON.user_allow, REASON.user_deny, REASON.role_deny])

/** Whether a decision with this code was decided by a row of the policy (the engine's decidingRule() names it). */
export const namesARow = (code: ReasonCode): boolean => NAMES_A_ROW.has(code)

/** The words of a reason code: the decision log's kinds (section 13's and `deactivated`). */
export const REASON_NAMES = ['root', 'role', 'user_allow', 'user_deny', 'role_deny', 'none', 'not_in_catalog', 'outside_home_domain', 'deactivated'] as const
export type ReasonName = (typeof REASON_NAMES)[number]

/** An explanation's kind for a code: `deactivated` is not one of them, and reads `none`. */
export const explainedKind = (code: ReasonCode): ReasonKind => (code === REASON.deactivated ? 'none' : (REASON_NAMES[code] as ReasonKind))

/**
 * The reason of a model's answer from the row that decided it: the user's
 * own row (its id as the subject) is an override, any other a role's; an
 * allowed answer is an allow, a refused one a deny when the row's effect is
 * one, else nothing held the pair.
 */
export function reasonOf(subjectId: string, allowed: boolean, rule: readonly string[] | null): ReasonCode {
  const own = rule !== null && rule[0] === subjectId
  if (allowed) return own ? REASON.user_allow : REASON.role
  if (rule !== null && rule[rule.length - 1] === 'deny') return own ? REASON.user_deny : REASON.role_deny
  return REASON.none
}
