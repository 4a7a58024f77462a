/**
 * The policy as a Casbin CSV file: `p` and `g` lines that Casbin's own file
 * adapter reads with `model.conf` (`newEnforcer('model.conf', 'policy.csv')`).
 *
 *   p, <sub-role>, <domain>, <obj>, <act>, allow|deny    a role's rule (casbin_rule)
 *   p, <user id>,  <domain>, <obj>, <act>, allow|deny    a user's override (permission_overrides)
 *   g, <user id>,  <sub-role>, <home domain>             an assignment (casbin_rule)
 *
 * Export writes a header (format and scope, see ../domain/policyFile.ts),
 * then the stored policy sorted, an override that expires preceded by its
 * `# expires_at` comment. Import makes the stored `p` rules what a file says,
 * in one write, under the rules a grant or deny follows; `g` lines are
 * checked, never applied (see checkLine). It refuses a file whose scope is
 * not the one asked for, and an import that would remove most of the policy.
 *
 * Rules about a pair that is not active in the catalog decide nothing (the
 * engine refuses the pair first) and a file may not name such a pair: export
 * leaves them out and import leaves them where they are, so exporting and
 * importing the same store changes nothing.
 *
 * Expiry: export writes the overrides that count at that moment, with their
 * instants; an import sets each override's expiry to the file's (none
 * without a comment) and leaves out an override whose instant has passed,
 * naming it. A file without a header (written before the header existed)
 * carries no expiry: an override whose line it keeps keeps its expiry, and
 * one it adds or changes never expires.
 */
import { BracketAwareCsvParser } from 'casbin'
import { SYSTEM_ACTOR, tenantOfDomain, type AuditEntry } from '../domain/audit.js'
import { ruleAdded, ruleRemoved, type StoreChange } from '../domain/changes.js'
import { DOMAIN_PATTERN, SUB_ROLE_CODE_PATTERN, UUID_PATTERN } from '../domain/identifiers.js'
import { GLOBAL_DOMAIN, ROOT_SUB_ROLE, homeDomain, type Account } from '../domain/principals.js'
import {
  DEFAULT_MAX_REMOVAL_SHARE,
  applyHeaderLine,
  describeMassRemoval,
  expiryComment,
  headerLines,
  massRemoval,
  readExpiryComment,
  readHeaderLine,
  scopeProblem,
  type FileHeader,
  type FileScope,
  type MassRemoval,
} from '../domain/policyFile.js'
import type { Queryable } from '../storage/db.js'
import { findAccountById } from '../storage/accounts.js'
import { merchantExists } from '../storage/merchants.js'
import { deleteOverride, iterateOverrides, setOverride, type Effect, type OverrideWrite } from '../storage/overrides.js'
import { deleteRule, insertRule, iterateRules } from '../storage/policyRows.js'
import { currentRevision } from '../storage/revision.js'
import { ensureSubRole } from '../storage/subRoles.js'
import type { CommandContext } from './context.js'
import { overrideExpired } from './overrideExpiry.js'
import { assertDomainExists } from './permissionContext.js'

/** A policy file larger than this is refused before it is read (about 100,000 lines). */
export const MAX_POLICY_FILE_BYTES = 8 * 1024 * 1024

/** Problems reported for one refused file; the rest are counted. */
const MAX_PROBLEMS = 50

export type PolicyType = 'p' | 'g'

/** One Casbin rule: `p` values are sub, dom, obj, act, eft; `g` values are user, role, domain. */
export interface Rule {
  ptype: PolicyType
  values: string[]
  /** A user's override that expires: its instant (epoch ms). */
  expiresAt?: number | null
}

export interface FileLine extends Rule {
  /** 1-based line number in the file. */
  line: number
}

/** A policy file as read: its header (null when it has none), its rules, and the lines that cannot be read. */
export interface ParsedPolicy {
  header: FileHeader | null
  lines: FileLine[]
  problems: LineProblem[]
}

export interface LineProblem {
  line: number
  reason: string
}

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

const uuid = new RegExp(UUID_PATTERN)
const subRoleCode = new RegExp(SUB_ROLE_CODE_PATTERN)
const domainName = new RegExp(DOMAIN_PATTERN)
const WIDTH: Record<PolicyType, number> = { p: 5, g: 3 }

export const isUserId = (subject: string): boolean => uuid.test(subject)

// ---------------------------------------------------------------- format

/**
 * A field as Casbin's CSV reader gets it back: quoted only when it has to be.
 * Stored identifiers never need it (no commas, quotes or spaces are allowed
 * in them); a line break could not be read back at all.
 */
function csvField(value: string): string {
  if (/[\r\n]/.test(value)) throw new Error(`a policy value cannot hold a line break: ${JSON.stringify(value)}`)
  return /[",]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value
}

/** `p, clerk, m-1, orders, refund, allow`: fields separated by ", ", as Casbin writes and reads them. */
export function formatRule(rule: Rule): string {
  return [rule.ptype, ...rule.values.map(csvField)].join(', ')
}

const domainRank = (domain: string) => (domain === GLOBAL_DOMAIN ? '0' : `1${domain}`)

/** The order of an exported file: p before g; global first, then each merchant; roles before users. */
function sortKey(rule: Rule): string[] {
  const [a = '', b = '', c = '', d = '', e = ''] = rule.values
  if (rule.ptype === 'p') return ['0', domainRank(b), isUserId(a) ? '1' : '0', a, c, d, e]
  return ['1', domainRank(c), b, a]
}

export function compareRules(x: Rule, y: Rule): number {
  const a = sortKey(x)
  const b = sortKey(y)
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const s = a[i] ?? ''
    const t = b[i] ?? ''
    // Code-unit order, never the locale's: the same store exports the same bytes everywhere.
    if (s !== t) return s < t ? -1 : 1
  }
  return 0
}

/** The header, then the rules sorted, one line each; an override that expires after its `# expires_at` comment. */
export function formatPolicyCsv(rules: readonly Rule[], scope: FileScope): string {
  const lines = [...rules]
    .sort(compareRules)
    .flatMap((rule) => (rule.expiresAt === undefined || rule.expiresAt === null ? [formatRule(rule)] : [expiryComment(rule.expiresAt), formatRule(rule)]))
  return `${[...headerLines(scope), ...lines].join('\n')}\n`
}

// ---------------------------------------------------------------- parse

const parser = new BracketAwareCsvParser()

/**
 * Reads a file exactly as Casbin's file adapter does (lines split on "\n",
 * blank lines and lines starting with "#" skipped, each line parsed by
 * Casbin's own CSV parser, values unquoted and trimmed), so an import sees
 * the rules Casbin would load. Lines Casbin would ignore or load in a shape
 * the service never stores are problems here. Of the comments, the header
 * (before the first rule) and `# expires_at`, which belongs to the override
 * on the next line, are read.
 */
export function parsePolicyCsv(text: string): ParsedPolicy {
  const lines: FileLine[] = []
  const problems: LineProblem[] = []
  const header: Partial<FileHeader> = {}
  let headerSeen = false
  let headerBroken = false
  let ruleSeen = false
  let pendingExpiry: { line: number; at: number } | null = null
  const orphanExpiry = () => {
    if (pendingExpiry !== null) problems.push({ line: pendingExpiry.line, reason: "an expires_at comment must come just before a user's override line" })
    pendingExpiry = null
  }
  text.split('\n').forEach((raw, index) => {
    const line = index + 1
    if (raw.trim() === '') return
    if (raw.trim().startsWith('#')) {
      const headerLine = readHeaderLine(raw)
      if (headerLine !== null) {
        headerSeen = true
        const problem = ruleSeen ? 'the header (policy-format, scope) comes before the first rule' : applyHeaderLine(header, headerLine)
        if (problem !== null) {
          headerBroken = true
          problems.push({ line, reason: problem })
        }
        return
      }
      const expiry = readExpiryComment(raw)
      if (expiry === null) return
      orphanExpiry()
      if ('problem' in expiry) problems.push({ line, reason: expiry.problem })
      else pendingExpiry = { line, at: expiry.at }
      return
    }
    const expiresAt = pendingExpiry
    pendingExpiry = null
    ruleSeen = true
    let tokens: string[] | undefined
    try {
      tokens = parser.parse(raw)?.[0]
    } catch (error) {
      problems.push({ line, reason: `cannot be read as CSV: ${(error as Error).message.split('\n')[0] ?? ''}` })
      return
    }
    if (tokens === undefined || tokens.length === 0) return
    const unquote = (v: string) => (v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v)
    const key = unquote((tokens[0] ?? '').trim())
    const values = tokens.slice(1).map((v) => unquote(v).replace(/""/g, '"').trim())
    if (key !== 'p' && key !== 'g') {
      problems.push({ line, reason: `a line starts with p or g, not "${key}"` })
      return
    }
    const shape = key === 'p' ? 'p, <sub-role or user id>, <domain>, <obj>, <act>, allow|deny' : 'g, <user id>, <sub-role>, <domain>'
    if (values.length !== WIDTH[key] || values.some((v) => v === '')) {
      problems.push({ line, reason: `expected ${shape}` })
      return
    }
    if (key === 'p' && values[4] !== 'allow' && values[4] !== 'deny') {
      problems.push({ line, reason: `the effect must be allow or deny, not "${values[4] ?? ''}"` })
      return
    }
    if (expiresAt !== null && (key !== 'p' || !isUserId(values[0] ?? ''))) {
      problems.push({ line: expiresAt.line, reason: "an expires_at comment must come just before a user's override line" })
    }
    lines.push({ ptype: key, values, line, ...(expiresAt !== null ? { expiresAt: expiresAt.at } : {}) })
  })
  orphanExpiry()
  let parsedHeader: FileHeader | null = null
  if (header.format !== undefined && header.scope !== undefined) parsedHeader = { format: header.format, scope: header.scope }
  else if (headerSeen && !headerBroken) {
    problems.push({ line: 1, reason: `the header needs both lines: ${headerLines({ domain: null }).join(' and ')} (or # scope: domain <merchant id>)` })
  }
  return { header: parsedHeader, lines, problems }
}

// ---------------------------------------------------------------- the store

const keyOf = (values: readonly string[]) => values.join('\u0000')
/** An override's identity: user, domain, obj, act (its effect is its value). */
const overrideKey = (values: readonly string[]) => keyOf(values.slice(0, 4))

interface StoredOverride {
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

/**
 * The stored rules as the engine counts them at `now` (epoch ms): overrides
 * that have expired are not read (no replica counts them; the sweep removes
 * them), and rules of inactive pairs or of other shapes are only counted.
 */
export async function readStoredPolicy(
  q: Queryable,
  isActive: (obj: string, act: string) => boolean,
  domain: string | undefined,
  now: number,
): Promise<StoredPolicy> {
  const stored: StoredPolicy = { roles: new Map(), overrides: new Map(), groupings: new Map(), dormant: 0 }
  const filter = domain === undefined ? {} : { domain }
  for await (const row of iterateRules(q, filter)) {
    const ptype = row.ptype
    if ((ptype !== 'p' && ptype !== 'g') || row.fields.length !== WIDTH[ptype]) {
      stored.dormant++
    } else if (ptype === 'g') {
      stored.groupings.set(keyOf(row.fields), row.fields)
    } else if (!isActive(row.fields[2] ?? '', row.fields[3] ?? '')) {
      stored.dormant++
    } else {
      stored.roles.set(keyOf(row.fields), row.fields)
    }
  }
  for await (const row of iterateOverrides(q, filter)) {
    const expiresAt = row.expires_at?.getTime() ?? null
    if (expiresAt !== null && expiresAt <= now) continue
    if (!isActive(row.obj, row.act)) {
      stored.dormant++
      continue
    }
    const values = [row.user_id, row.domain, row.obj, row.act, row.effect]
    stored.overrides.set(overrideKey(values), { values, effect: row.effect, expiresAt })
  }
  return stored
}

export function storedRules(stored: StoredPolicy): Rule[] {
  return [
    ...[...stored.roles.values()].map((values): Rule => ({ ptype: 'p', values })),
    ...[...stored.overrides.values()].map((o): Rule => ({ ptype: 'p', values: o.values, expiresAt: o.expiresAt })),
    ...[...stored.groupings.values()].map((values): Rule => ({ ptype: 'g', values })),
  ]
}

// ---------------------------------------------------------------- export

export interface PolicyExport {
  csv: string
  rules: number
  /** Stored rows not written: they decide nothing (pairs not active in the catalog, shapes the service never writes). */
  leftOut: number
}

/**
 * The stored policy as Casbin CSV. With `domain`, what decides in that
 * domain, as a filtered load reads it: the p and g rows of the domain and
 * of `global` (global role grants, system-owner users' assignments and
 * overrides). Read from one snapshot.
 */
export async function exportPolicy(ctx: Pick<CommandContext, 'db' | 'engine' | 'clock'>, options: { domain?: string | undefined } = {}): Promise<PolicyExport> {
  const { domain } = options
  if (domain !== undefined) await assertDomainExists(ctx.db, domain)
  const stored = await ctx.db.snapshot((tx) => readStoredPolicy(tx, (obj, act) => ctx.engine.isActive(obj, act), domain, ctx.clock.now()))
  const rules = storedRules(stored)
  return { csv: formatPolicyCsv(rules, { domain: domain ?? null }), rules: rules.length, leftOut: stored.dormant }
}

// ---------------------------------------------------------------- rules of a file

/** What the line checks need to know, looked up once per file. */
export interface LineContext {
  /** `--domain`: only this domain's rules are imported; `global` lines are context. */
  scope: string | null
  merchants: ReadonlySet<string>
  accounts: ReadonlyMap<string, Account>
  isActive(obj: string, act: string): boolean
  isRootRole(code: string): boolean
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

const isRootCode = (c: LineContext, code: string) => code === ROOT_SUB_ROLE || c.isRootRole(code)

function domainProblem(c: LineContext, domain: string): string | null {
  if (domain !== GLOBAL_DOMAIN && (!domainName.test(domain) || !c.merchants.has(domain))) {
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
    if (isRootCode(c, account.sub_role_code)) {
      return `user ${subject} has the root sub-role ${account.sub_role_code}: it holds every permission and takes no overrides`
    }
    if (account.principal_type === 'merchant' && account.merchant_id !== domain) {
      return `user ${subject} belongs to merchant ${account.merchant_id ?? ''}: its overrides must be in ${account.merchant_id ?? ''}, not ${domain}`
    }
    return null
  }
  if (!subRoleCode.test(subject)) return `the subject must be a sub-role code (a-z, 0-9, _) or a user id, not "${subject}"`
  if (isRootCode(c, subject)) return `${subject} is a root sub-role: it holds every permission and takes no grants`
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
    if (c.stored.groupings.has(keyOf(rule.values))) return null
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
  if (!c.isActive(obj, act)) return `${obj}:${act} is not active in the catalog`
  if (c.scope !== null && domain === GLOBAL_DOMAIN) {
    const stored = isUserId(subject) ? c.stored.overrides.get(overrideKey(rule.values))?.effect === effect : c.stored.roles.has(keyOf(rule.values))
    if (!stored) return `with --domain ${c.scope} the global lines must be as stored, and this one is not: import without --domain to change global`
  }
  return null
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
    const key = `${rule.ptype}\u0000${override ? overrideKey(rule.values) : keyOf(rule.values)}`
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
    else desired.roles.set(keyOf(rule.values), rule.values)
  }
  return { problems, desired, expired }
}

/** The expiry an override line asks for: its comment's, else none (or, for a file without a header, the stored one if the line keeps the override). */
function wantedExpiry(c: LineContext, rule: FileLine): number | null {
  if (rule.expiresAt !== undefined) return rule.expiresAt
  if (c.fileExpiry) return null
  const stored = c.stored.overrides.get(overrideKey(rule.values))
  return stored !== undefined && stored.effect === rule.values[4] ? stored.expiresAt : null
}

// ---------------------------------------------------------------- difference

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

/**
 * The difference between what a file asks for and the store: every stored
 * rule in reach (all domains, or only `scope`) that the file leaves out is
 * removed, every rule it adds is added. Dormant rows were never read.
 */
export function diffPolicy(desired: DesiredPolicy, stored: StoredPolicy, scope: string | null): PolicyDiff {
  const inReach = (values: readonly string[]) => scope === null || values[1] === scope
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

// ---------------------------------------------------------------- import

export interface ImportOptions {
  /** Import only this domain's rules; the file's `global` lines must be as stored. */
  domain?: string | undefined
  /** Compute and return the difference, write nothing. */
  dryRun?: boolean
  /** Import a file without a header as the scope `domain` says (all without it). */
  allowHeaderless?: boolean
  /** Apply an import that removes more than `maxRemovalShare` of the rules in reach. */
  allowMassRemoval?: boolean
  /** The share (0 to 1) of the rules in reach an import may remove; default 0.1. */
  maxRemovalShare?: number
}

export interface PolicyImport {
  diff: PolicyDiff
  /** Override lines left out because their instant has passed. */
  expired: ExpiredLine[]
  /**
   * Set by a dry run whose import would be refused for removing too much
   * (an import that is not a dry run throws PolicyFileRefused instead).
   */
  refusal: string | null
  /** False for a dry run, or when nothing differed. */
  applied: boolean
  /** The store's revision after the import (before it, for a dry run or no change). */
  revision: number
}

/** Looks up what the line checks need: the merchants and accounts the file names. */
async function lineContext(
  ctx: Pick<CommandContext, 'engine' | 'accounts'>,
  q: Queryable,
  lines: readonly FileLine[],
  stored: StoredPolicy,
  scope: string | null,
  now: number,
  fileExpiry: boolean,
): Promise<LineContext> {
  const domains = new Set<string>()
  const users = new Set<string>()
  for (const rule of lines) {
    const [first = '', second = '', third = ''] = rule.values
    domains.add(rule.ptype === 'p' ? second : third)
    if (isUserId(first)) users.add(first)
  }
  for (const o of stored.overrides.values()) users.add(o.values[0] ?? '')
  const merchants = new Set<string>()
  for (const d of domains) if (d !== GLOBAL_DOMAIN && domainName.test(d) && (await merchantExists(q, d))) merchants.add(d)
  const accounts = new Map<string, Account>()
  for (const id of users) {
    // A mixed-case id is refused by the checks; it is not looked up under another spelling.
    if (id !== id.toLowerCase()) continue
    // Memory first; an account it does not know yet is read in the same transaction (the embedded
    // store has one connection, so a query beside the transaction would wait for it forever).
    const account = ctx.accounts.peek(id) ?? (await findAccountById(q, id))
    if (account !== null) accounts.set(id, account)
  }
  return {
    scope,
    merchants,
    accounts,
    isActive: (obj, act) => ctx.engine.isActive(obj, act),
    isRootRole: (code) => ctx.engine.isRootRole(code),
    stored,
    now,
    fileExpiry,
  }
}

interface Plan {
  diff: PolicyDiff
  expired: ExpiredLine[]
  accounts: ReadonlyMap<string, Account>
  massRemoval: MassRemoval | null
}

/** The p rules of the store the import may change: those of `scope`, or all. */
function rulesInReach(stored: StoredPolicy, scope: string | null): number {
  const inReach = (values: readonly string[]) => scope === null || values[1] === scope
  return [...stored.roles.values()].filter(inReach).length + [...stored.overrides.values()].filter((o) => inReach(o.values)).length
}

/** Reads the store through `q`, checks the file against it and works out the difference; throws PolicyFileError. */
async function plan(
  ctx: Pick<CommandContext, 'engine' | 'accounts' | 'clock'>,
  q: Queryable,
  parsed: ParsedPolicy,
  scope: string | null,
  maxRemovalShare: number,
): Promise<Plan> {
  const now = ctx.clock.now()
  const stored = await readStoredPolicy(q, (obj, act) => ctx.engine.isActive(obj, act), scope ?? undefined, now)
  const c = await lineContext(ctx, q, parsed.lines, stored, scope, now, parsed.header !== null)
  const { problems, desired, expired } = checkLines(c, parsed.lines)
  const all = [...parsed.problems, ...problems].sort((a, b) => a.line - b.line)
  if (all.length > 0) throw new PolicyFileError(all.slice(0, MAX_PROBLEMS), all.length)
  const diff = diffPolicy(desired, stored, scope)
  return { diff, expired, accounts: c.accounts, massRemoval: massRemoval(diff.removed.length, rulesInReach(stored, scope), maxRemovalShare) }
}

/**
 * Writes the difference in `tx` and returns the audit entries and changes of
 * what did change. Each row's own write says what it found (the store was
 * read before the rows were locked): a row another writer changed the same
 * way meanwhile is not audited twice, and an override that had expired (no
 * replica counted it; the sweep had not removed it yet) is audited
 * `override_expired`, as the sweep would have.
 */
async function apply(
  tx: Queryable,
  diff: PolicyDiff,
  accounts: ReadonlyMap<string, Account>,
  now: Date,
): Promise<{ audit: AuditEntry[]; changes: StoreChange[] }> {
  const audit: AuditEntry[] = []
  const changes: StoreChange[] = []
  const entry = (action: AuditEntry['action'], values: readonly string[]): AuditEntry => {
    const [subject = '', domain = '', obj = '', act = ''] = values
    const user = isUserId(subject)
    return {
      action,
      target_type: user ? 'user' : 'role',
      target_id: subject,
      obj,
      act,
      domain,
      merchant_id: user ? (accounts.get(subject)?.merchant_id ?? null) : tenantOfDomain(domain),
      actor: SYSTEM_ACTOR,
    }
  }
  const effectAction = (effect: string) => (effect === 'allow' ? ('grant' as const) : ('deny' as const))
  const overrideKeyOf = (values: readonly string[]) => {
    const [user_id = '', domain = '', obj = '', act = ''] = values
    return { user_id, domain, obj, act }
  }
  const expiredOn = (write: OverrideWrite, key: string[]) => {
    if (write.expired === null) return
    const expired = overrideExpired({ ...overrideKeyOf(key), effect: write.expired.effect }, accounts.get(key[0] ?? '')?.merchant_id ?? null)
    audit.push(expired.audit)
    changes.push(expired.change)
  }
  const setUser = async (values: string[], expiresAt: number | null) => {
    const key = overrideKeyOf(values)
    const effect = values[4] as Effect
    const expires = expiresAt === null ? null : new Date(expiresAt)
    const write = await setOverride(tx, { ...key, effect, expires_at: expires }, SYSTEM_ACTOR.id, now)
    expiredOn(write, values.slice(0, 4))
    const { previous } = write
    if (previous !== null && previous.effect === effect && (previous.expires_at?.getTime() ?? null) === expiresAt) return
    if (previous !== null && previous.effect !== effect) changes.push(ruleRemoved('p', [...values.slice(0, 4), previous.effect]))
    audit.push(entry(effectAction(effect), values))
    changes.push(ruleAdded('p', values, expires))
  }

  for (const { values } of diff.removed) {
    if (isUserId(values[0] ?? '')) {
      const write = await deleteOverride(tx, overrideKeyOf(values), now)
      expiredOn(write, values.slice(0, 4))
      if (write.previous === null) continue
      audit.push(entry('revoke', values))
      changes.push(ruleRemoved('p', [...values.slice(0, 4), write.previous.effect]))
    } else if (await deleteRule(tx, 'p', values)) {
      audit.push(entry('revoke', values))
      changes.push(ruleRemoved('p', values))
    }
  }
  for (const { values, expiresAt } of diff.added) {
    if (isUserId(values[0] ?? '')) {
      await setUser(values, expiresAt ?? null)
      continue
    }
    await ensureSubRole(tx, values[0] ?? '')
    if (await insertRule(tx, 'p', values)) {
      audit.push(entry(effectAction(values[4] ?? ''), values))
      changes.push(ruleAdded('p', values))
    }
  }
  for (const { to, toExpiresAt } of diff.changed) await setUser(to, toExpiresAt)
  return { audit, changes }
}

/**
 * policy import: makes the stored p rules what the file says (all of them,
 * or those of one domain), in one write: its rows, an audit entry per change
 * (actor `system`), the change-feed entries other replicas follow, one
 * revision. A file with any line that breaks the rules changes nothing
 * (PolicyFileError names every such line); nor does a file whose header
 * names another scope, a file without a header (unless allowHeaderless), or
 * an import that would remove more than a handful of rules and more than
 * maxRemovalShare of those in reach (unless allowMassRemoval):
 * PolicyFileRefused says why. The store is read, and the file checked
 * against it, inside the write's own transaction.
 */
export async function importPolicy(ctx: CommandContext, text: string, options: ImportOptions = {}): Promise<PolicyImport> {
  const scope = options.domain ?? null
  if (scope !== null) await assertDomainExists(ctx.db, scope)
  const parsed = parsePolicyCsv(text)
  // A header that cannot be read is named with its line (PolicyFileError) rather than taken for none.
  const refusedScope = parsed.header === null && parsed.problems.length > 0 ? null : scopeProblem(parsed.header, { domain: scope }, options.allowHeaderless === true)
  if (refusedScope !== null) throw new PolicyFileRefused(refusedScope)
  const maxShare = options.allowMassRemoval === true ? 1 : (options.maxRemovalShare ?? DEFAULT_MAX_REMOVAL_SHARE)
  if (options.dryRun === true) {
    return ctx.db.snapshot(async (tx) => {
      const planned = await plan(ctx, tx, parsed, scope, maxShare)
      const refusal = planned.massRemoval === null ? null : describeMassRemoval(planned.massRemoval)
      return { diff: planned.diff, expired: planned.expired, refusal, applied: false, revision: await currentRevision(tx) }
    })
  }
  const outcome = await ctx.writes.run(async (tx) => {
    const planned = await plan(ctx, tx, parsed, scope, maxShare)
    if (planned.massRemoval !== null) throw new PolicyFileRefused(describeMassRemoval(planned.massRemoval))
    const { audit, changes } = await apply(tx, planned.diff, planned.accounts, new Date(ctx.clock.now()))
    return { changed: audit.length > 0, audit, changes, result: planned }
  })
  return { diff: outcome.result.diff, expired: outcome.result.expired, refusal: null, applied: outcome.changed, revision: outcome.revision }
}
