/**
 * The rules a policy file's lines follow before an import applies them. They
 * are the rules of a grant or deny, called from where they live (the catalog
 * and root in ./grantRules.ts and ./root.ts, a merchant user's home domain in
 * ./tenancy.ts), turned into a reason per line; what is only the file's (its
 * scope, its `g` lines, repeats) is here. Pure: what the checks need is
 * looked up first (LineContext).
 */
import { ServiceError } from './errors.js'
import { assertInCatalog, assertScopeAllows } from './grantRules.js'
import { SUB_ROLE_CODE_PATTERN, isDomainName } from './identifiers.js'
import { formatRule, isUserId, type Effect, type FileLine, type LineProblem, type Rule } from './policyCsv.js'
import { overrideKey, ruleKey, type DesiredPolicy, type StoredPolicy } from './policyDiff.js'
import type { CatalogScope } from './permissions.js'
import { GLOBAL_DOMAIN, homeDomain, type Account } from './principals.js'
import { isRootSubRole, type RootRoles } from './root.js'
import { assertOverrideDomain } from './tenancy.js'

/** Problems reported for one refused file; the rest are counted. */
export const MAX_PROBLEMS = 50

/** A file refused as a whole (its scope, its header, or what it would remove); nothing was changed. */
export class PolicyFileRefused extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'PolicyFileRefused'
  }
}

/** A file that breaks the rules: every problem names its line; nothing was changed. */
export class PolicyFileError extends Error {
  constructor(
    readonly problems: LineProblem[],
    readonly total: number,
  ) {
    super(`${total} line${total === 1 ? '' : 's'} of the policy file break the rules`)
    this.name = 'PolicyFileError'
  }
}

/** What the line checks need to know, looked up once per file. */
export interface LineContext {
  /** `--domain`: only this domain's rules are imported; `global` lines are context. */
  scope: string | null
  merchants: ReadonlySet<string>
  accounts: ReadonlyMap<string, Account>
  isActive(obj: string, act: string): boolean
  /** The pair's catalog scope. */
  pairScope(obj: string, act: string): CatalogScope
  roots: RootRoles
  stored: StoredPolicy
  /** The instant (epoch ms) expiries are read against. */
  now: number
  /**
   * True: an override's expiry is the file's (none without a comment). False
   * (a file without a header, written before expiries were): an override line
   * without a comment that keeps a stored override keeps its expiry, one that
   * adds or changes an override sets none.
   */
  fileExpiry: boolean
}

/** A line left out of an import: its override's instant has passed. */
export interface ExpiredLine {
  line: number
  rule: Rule
}

const subRoleCode = new RegExp(SUB_ROLE_CODE_PATTERN)

/** Whether a rule of the API refuses: the file names the line, the API answers the error. */
function refuses(rule: () => void): boolean {
  try {
    rule()
    return false
  } catch (error) {
    if (error instanceof ServiceError) return true
    throw error
  }
}

function domainProblem(c: LineContext, domain: string): string | null {
  if (domain !== GLOBAL_DOMAIN && (!isDomainName(domain) || !c.merchants.has(domain))) {
    return `unknown domain "${domain}": neither global nor a merchant`
  }
  if (c.scope !== null && domain !== c.scope && domain !== GLOBAL_DOMAIN) {
    return `domain ${domain} is outside --domain ${c.scope} (only ${c.scope} and global lines)`
  }
  return null
}

function subjectProblem(c: LineContext, subject: string, domain: string): string | null {
  if (isUserId(subject)) {
    if (subject !== subject.toLowerCase()) return `user ids are written in lower case: ${subject.toLowerCase()}`
    const account = c.accounts.get(subject)
    if (account === undefined) return `no user ${subject}`
    if (isRootSubRole(c.roots, account.sub_role_code)) {
      return `user ${subject} has the root sub-role ${account.sub_role_code}: it holds every permission and takes no overrides`
    }
    if (refuses(() => assertOverrideDomain(account, domain))) {
      return `user ${subject} belongs to merchant ${account.merchant_id ?? ''}: its overrides must be in ${account.merchant_id ?? ''}, not ${domain}`
    }
    return null
  }
  if (!subRoleCode.test(subject)) return `the subject must be a sub-role code (a-z, 0-9, _) or a user id, not "${subject}"`
  if (isRootSubRole(c.roots, subject)) return `${subject} is a root sub-role: it holds every permission and takes no grants`
  return null
}

/**
 * Why a `p` or `g` line may not be imported, or null. `p` lines follow the
 * rules of a grant or deny (a domain that exists, a pair active in the
 * catalog, no rule for a root sub-role or root user, a merchant user's
 * overrides in its merchant). A role's rule may be a deny as well: the
 * model and casbin_rule hold both.
 *
 * `g` lines are checked, never applied: each must be an assignment the store
 * holds (a user's is its account's sub-role in its home domain), and an
 * assignment the file leaves out stays. Accounts change through the account
 * API, whose rules (who may move whom, root never given or taken) a policy
 * file cannot follow; the g lines are there so that the file is a whole
 * Casbin policy.
 */
export function checkLine(c: LineContext, rule: FileLine): string | null {
  if (rule.ptype === 'g') {
    const [user = '', role = '', domain = ''] = rule.values
    const problem = domainProblem(c, domain)
    if (problem !== null) return problem
    if (c.stored.groupings.has(ruleKey(rule.values))) return null
    if (isUserId(user)) {
      const account = c.accounts.get(user)
      if (account === undefined) return `no user ${user}`
      const held = formatRule({ ptype: 'g', values: [user, account.sub_role_code, homeDomain(account)] })
      return `g lines must match the stored assignment of user ${user} ("${held}"): a sub-role is changed through the account API, not the policy file`
    }
    return `g, ${user}, ${role}, ${domain} is not a stored assignment: g lines must match the store (the policy file does not change assignments)`
  }
  const [subject = '', domain = '', obj = '', act = '', effect = ''] = rule.values
  const problem = domainProblem(c, domain) ?? subjectProblem(c, subject, domain)
  if (problem !== null) return problem
  if (refuses(() => assertInCatalog({ active: c.isActive(obj, act), obj, act }))) return `${obj}:${act} is not active in the catalog`
  const merchantUser = isUserId(subject) && c.accounts.get(subject)?.principal_type === 'merchant'
  // A row written before the scope rule counts for nobody; an exported file keeps it, so as stored it stays importable.
  if (refuses(() => assertScopeAllows({ scope: c.pairScope(obj, act), targetIsMerchantUser: merchantUser, obj, act, domain })) && !asStored(c, rule.values, effect)) {
    return `${obj}:${act} is for system-owner users only: it cannot be granted or denied in merchant ${domain} or to a merchant user`
  }
  if (c.scope !== null && domain === GLOBAL_DOMAIN && !asStored(c, rule.values, effect)) {
    return `with --domain ${c.scope} the global lines must be as stored, and this one is not: import without --domain to change global`
  }
  return null
}

/** Whether a `p` line is in the store as the file has it (an override with the same effect). */
function asStored(c: LineContext, values: readonly string[], effect: string): boolean {
  return isUserId(values[0] ?? '') ? c.stored.overrides.get(overrideKey(values))?.effect === effect : c.stored.roles.has(ruleKey(values))
}

/** The expiry an override line asks for: its comment's, else none (or, for a file without a header, the stored one if the line keeps the override). */
function wantedExpiry(c: LineContext, rule: FileLine): number | null {
  if (rule.expiresAt !== undefined) return rule.expiresAt
  if (c.fileExpiry) return null
  const stored = c.stored.overrides.get(overrideKey(rule.values))
  return stored !== undefined && stored.effect === rule.values[4] ? stored.expiresAt : null
}

/**
 * The rules the file asks for, after checking every line; problems name
 * their lines, in line order. An override whose instant has passed is left
 * out unchecked (its user may be gone since the file was written), as if the
 * file did not name it, and listed.
 */
export function checkLines(c: LineContext, lines: readonly FileLine[]): { problems: LineProblem[]; desired: DesiredPolicy; expired: ExpiredLine[] } {
  const problems: LineProblem[] = []
  const expired: ExpiredLine[] = []
  const desired: DesiredPolicy = { roles: new Map(), overrides: new Map() }
  const seen = new Map<string, { line: number; effect: string }>()
  for (const rule of lines) {
    if (rule.expiresAt !== undefined && rule.expiresAt !== null && rule.expiresAt <= c.now) {
      expired.push({ line: rule.line, rule: { ptype: rule.ptype, values: rule.values, expiresAt: rule.expiresAt } })
      continue
    }
    const reason = checkLine(c, rule)
    if (reason !== null) {
      problems.push({ line: rule.line, reason })
      continue
    }
    // One line per rule; one override per user, domain and pair.
    const override = rule.ptype === 'p' && isUserId(rule.values[0] ?? '')
    const key = `${rule.ptype}\u0000${override ? overrideKey(rule.values) : ruleKey(rule.values)}`
    const effect = rule.values[4] ?? ''
    const before = seen.get(key)
    if (before !== undefined) {
      const reason = before.effect === effect ? `repeats line ${before.line}` : `conflicts with line ${before.line}: one override per user, domain and pair`
      problems.push({ line: rule.line, reason })
      continue
    }
    seen.set(key, { line: rule.line, effect })
    if (rule.ptype === 'g' || (c.scope !== null && rule.values[1] !== c.scope)) continue
    if (override) desired.overrides.set(overrideKey(rule.values), { values: rule.values, effect: effect as Effect, expiresAt: wantedExpiry(c, rule) })
    else desired.roles.set(ruleKey(rule.values), rule.values)
  }
  return { problems, desired, expired }
}

/** Every problem of a file (reading and rules) in line order, as one error; null when there is none. */
export function fileError(problems: readonly LineProblem[]): PolicyFileError | null {
  if (problems.length === 0) return null
  const all = [...problems].sort((a, b) => a.line - b.line)
  return new PolicyFileError(all.slice(0, MAX_PROBLEMS), all.length)
}
