/**
 * The difference a policy import makes: the stored policy within its reach,
 * the policy a file asks for, and what turns one into the other. Pure: the
 * store is read in ../storage/storedPolicy.ts, the file checked in
 * ./policyImport.ts.
 */
import { compareRules, formatRule, type Effect, type Rule } from './policyCsv.js'
import { expiryComment } from './policyFile.js'

/** A rule's identity: all of its values. */
export const ruleKey = (values: readonly string[]): string => values.join('\u0000')
/** An override's identity: user, domain, obj, act (its effect is its value). */
export const overrideKey = (values: readonly string[]): string => ruleKey(values.slice(0, 4))

export interface StoredOverride {
  values: string[]
  effect: Effect
  /** Epoch ms; null: never expires. */
  expiresAt: number | null
}

/** The stored policy within reach of an export or import (all of it, or one domain plus `global`). */
export interface StoredPolicy {
  /** casbin_rule `p` rows by their five values. */
  roles: Map<string, string[]>
  /** Overrides in force, by user, domain and pair. */
  overrides: Map<string, StoredOverride>
  /** casbin_rule `g` rows by their three values. */
  groupings: Map<string, string[]>
  /** Rows left out: rules of pairs not active in the catalog, and rows of shapes the service never writes. */
  dormant: number
}

/** The stored policy as rules of a file. */
export function storedRules(stored: StoredPolicy): Rule[] {
  return [
    ...[...stored.roles.values()].map((values): Rule => ({ ptype: 'p', values })),
    ...[...stored.overrides.values()].map((o): Rule => ({ ptype: 'p', values: o.values, expiresAt: o.expiresAt })),
    ...[...stored.groupings.values()].map((values): Rule => ({ ptype: 'g', values })),
  ]
}

/** The p rules a file asks for within the import's reach. */
export interface DesiredPolicy {
  roles: Map<string, string[]>
  overrides: Map<string, StoredOverride>
}

/** An override whose effect or expiry changes. */
export interface OverrideChange {
  from: string[]
  to: string[]
  fromExpiresAt: number | null
  toExpiresAt: number | null
}

/** What an import changes: role rules and overrides added or removed, overrides whose effect or expiry changes. */
export interface PolicyDiff {
  added: Rule[]
  removed: Rule[]
  changed: OverrideChange[]
}

const inReachOf = (scope: string | null) => (values: readonly string[]) => scope === null || values[1] === scope

/**
 * The difference between what a file asks for and the store: every stored
 * rule in reach (all domains, or only `scope`) that the file leaves out is
 * removed, every rule it adds is added. Dormant rows were never read.
 */
export function diffPolicy(desired: DesiredPolicy, stored: StoredPolicy, scope: string | null): PolicyDiff {
  const inReach = inReachOf(scope)
  const diff: PolicyDiff = { added: [], removed: [], changed: [] }
  for (const [key, values] of desired.roles) if (!stored.roles.has(key)) diff.added.push({ ptype: 'p', values })
  for (const [key, values] of stored.roles) if (inReach(values) && !desired.roles.has(key)) diff.removed.push({ ptype: 'p', values })
  for (const [key, wanted] of desired.overrides) {
    const now = stored.overrides.get(key)
    if (now === undefined) diff.added.push({ ptype: 'p', values: wanted.values, expiresAt: wanted.expiresAt })
    else if (now.effect !== wanted.effect || now.expiresAt !== wanted.expiresAt) {
      diff.changed.push({ from: now.values, to: wanted.values, fromExpiresAt: now.expiresAt, toExpiresAt: wanted.expiresAt })
    }
  }
  for (const [key, now] of stored.overrides) {
    if (inReach(now.values) && !desired.overrides.has(key)) diff.removed.push({ ptype: 'p', values: now.values, expiresAt: now.expiresAt })
  }
  diff.added.sort(compareRules)
  diff.removed.sort(compareRules)
  diff.changed.sort((a, b) => compareRules({ ptype: 'p', values: a.from }, { ptype: 'p', values: b.from }))
  return diff
}

/** The p rules of the store an import may change: those of `scope`, or all. */
export function rulesInReach(stored: StoredPolicy, scope: string | null): number {
  const inReach = inReachOf(scope)
  return [...stored.roles.values()].filter(inReach).length + [...stored.overrides.values()].filter((o) => inReach(o.values)).length
}

export const changeCount = (diff: PolicyDiff): number => diff.added.length + diff.removed.length + diff.changed.length

/** A rule as a line of the difference: an override that expires says when. */
export const describeRule = (rule: Rule): string =>
  rule.expiresAt === undefined || rule.expiresAt === null ? formatRule(rule) : `${formatRule(rule)}  ${expiryComment(rule.expiresAt)}`

/**
 * `- p, …` and `+ p, …` lines in file order; an override whose effect or
 * expiry changes is its old line then its new one.
 */
export function describeDiff(diff: PolicyDiff): string[] {
  const entries: Array<{ sign: '-' | '+'; rule: Rule }> = [
    ...diff.removed.map((rule) => ({ sign: '-' as const, rule })),
    ...diff.added.map((rule) => ({ sign: '+' as const, rule })),
    ...diff.changed.flatMap((c) => [
      { sign: '-' as const, rule: { ptype: 'p' as const, values: c.from, expiresAt: c.fromExpiresAt } },
      { sign: '+' as const, rule: { ptype: 'p' as const, values: c.to, expiresAt: c.toExpiresAt } },
    ]),
  ]
  const withoutEffect = (rule: Rule): Rule => ({ ptype: rule.ptype, values: rule.values.slice(0, 4) })
  entries.sort((a, b) => compareRules(withoutEffect(a.rule), withoutEffect(b.rule)) || (a.sign === b.sign ? compareRules(a.rule, b.rule) : a.sign === '-' ? -1 : 1))
  return entries.map((e) => `${e.sign} ${describeRule(e.rule)}`)
}

export function summarizeDiff(diff: PolicyDiff): string {
  const n = changeCount(diff)
  if (n === 0) return 'no change: the store already holds this policy'
  const overrides = diff.changed.length === 1 ? 'override changes' : 'overrides change'
  return `${n} change${n === 1 ? '' : 's'}: ${diff.added.length} added, ${diff.removed.length} removed, ${diff.changed.length} ${overrides} effect or expiry`
}
