/**
 * Policy CSV, the file format alone: how a line is read and written, and the
 * order of an exported file. No I/O; `policy import`, `policy export` and
 * `model check --policy` all read and write through here, so a file means
 * the same to each of them and to Casbin's own file adapter.
 *
 *   p, <sub-role>, <domain>, <obj>, <act>, allow|deny    a role's rule
 *   p, <user id>,  <domain>, <obj>, <act>, allow|deny    a user's override
 *   g, <user id or sub-role>, <sub-role>, <domain>       an assignment
 *
 * Comment lines (the header and `# expires_at`) are read in ./policyFile.ts.
 */
import { BracketAwareCsvParser } from 'casbin'
import { UUID_PATTERN } from './identifiers.js'
import { applyHeaderLine, expiryComment, headerLines, readExpiryComment, readHeaderLine, type FileHeader, type FileScope } from './policyFile.js'
import { GLOBAL_DOMAIN } from './principals.js'

export type PolicyType = 'p' | 'g'

/** What a `p` rule does: grants the pair or denies it. */
export type Effect = 'allow' | 'deny'

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

export interface LineProblem {
  line: number
  reason: string
}

/** A policy file as read: its header (null when it has none), its rules, and the lines that cannot be read. */
export interface ParsedPolicy {
  header: FileHeader | null
  lines: FileLine[]
  problems: LineProblem[]
}

/** The values a rule of each type has, in the shapes the service stores (casbin_rule's p and g rows). */
export const RULE_WIDTH: Readonly<Record<PolicyType, number>> = { p: 5, g: 3 }

const RULE_SHAPE: Readonly<Record<PolicyType, string>> = {
  p: 'p, <sub-role or user id>, <domain>, <obj>, <act>, allow|deny',
  g: 'g, <user id or sub-role>, <sub-role>, <domain>',
}

const uuid = new RegExp(UUID_PATTERN)

/** A rule's subject is a user (its override) when it is a user id; sub-role codes never are. */
export const isUserId = (subject: string): boolean => uuid.test(subject)

// ---------------------------------------------------------------- one line

/** What one line of a file is, as Casbin's file adapter reads it. */
export type CsvLine = { kind: 'blank' } | { kind: 'comment'; text: string } | { kind: 'rule'; rule: Rule } | { kind: 'problem'; reason: string }

const parser = new BracketAwareCsvParser()

/**
 * A line of only these characters has nothing CSV or Casbin's bracket pass
 * reads specially (no quotes, brackets, tabs or line ends): split on commas
 * and trimmed, it gives what Casbin's parser gives, without setting up a CSV
 * parser for each of a million lines.
 */
const PLAIN_LINE = /^[A-Za-z0-9_.:@\-, ]*$/

/** A plain line's values as Casbin's parser reads them; null when the line is not plain. */
export function splitPlainLine(raw: string): string[] | null {
  if (!PLAIN_LINE.test(raw)) return null
  const values = raw.split(',')
  for (let i = 0; i < values.length; i++) values[i] = (values[i] as string).trim()
  return values
}

/** Casbin strips one pair of surrounding quotes and turns `""` into `"` after its parser has run. */
const unquote = (v: string) => (v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v)

/**
 * One line exactly as Casbin's file adapter reads it: a blank line, a line
 * starting with `#` (a comment: `#` anywhere else is data), or a rule parsed
 * by Casbin's own bracket-aware CSV parser, values unquoted and trimmed.
 * A rule is held to the shapes the service stores: `p` or `g`, every value
 * present (Casbin would match an empty one against empty request values),
 * and an effect of allow or deny.
 */
export function readCsvLine(raw: string): CsvLine {
  const trimmed = raw.trim()
  if (trimmed === '') return { kind: 'blank' }
  if (trimmed.startsWith('#')) return { kind: 'comment', text: raw }
  const plain = splitPlainLine(raw)
  let tokens: string[] | undefined = plain ?? undefined
  if (plain === null) {
    try {
      tokens = parser.parse(raw)?.[0]
    } catch (error) {
      return { kind: 'problem', reason: `cannot be read as CSV: ${(error as Error).message.split('\n')[0] ?? ''}` }
    }
  }
  if (tokens === undefined || tokens.length === 0) return { kind: 'blank' }
  // A plain line has no quotes to take off.
  const key = plain !== null ? (tokens[0] as string) : unquote((tokens[0] ?? '').trim())
  const values = plain !== null ? tokens.slice(1) : tokens.slice(1).map((v) => unquote(v).replace(/""/g, '"').trim())
  if (key !== 'p' && key !== 'g') return { kind: 'problem', reason: `a policy line starts with p or g, not "${key}"` }
  if (values.length !== RULE_WIDTH[key] || values.some((v) => v === '')) return { kind: 'problem', reason: `expected ${RULE_SHAPE[key]}` }
  if (key === 'p' && values[4] !== 'allow' && values[4] !== 'deny') return { kind: 'problem', reason: `the effect must be allow or deny, not "${values[4] ?? ''}"` }
  return { kind: 'rule', rule: { ptype: key, values } }
}

/** Every line of a text, numbered from 1; lines are split on "\n" as Casbin's file adapter splits them. */
export function readCsvLines(text: string): Array<CsvLine & { line: number }> {
  return text.split('\n').map((raw, index) => ({ ...readCsvLine(raw), line: index + 1 }))
}

// ---------------------------------------------------------------- a whole file

const ORPHAN_EXPIRY = "an expires_at comment must come just before a user's override line"

/**
 * A policy file: its rules (readCsvLine) and, of its comments, the header
 * (before the first rule) and `# expires_at`, which belongs to the override
 * on the next line. Lines Casbin would ignore or load in a shape the service
 * never stores are problems.
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
    if (pendingExpiry !== null) problems.push({ line: pendingExpiry.line, reason: ORPHAN_EXPIRY })
    pendingExpiry = null
  }
  // Line by line, with no second list of a million lines.
  const raws = text.split('\n')
  for (let index = 0; index < raws.length; index++) {
    const read = readCsvLine(raws[index] as string)
    const line = index + 1
    if (read.kind === 'blank') continue
    if (read.kind === 'comment') {
      const headerLine = readHeaderLine(read.text)
      if (headerLine !== null) {
        headerSeen = true
        const problem = ruleSeen ? 'the header (policy-format, scope) comes before the first rule' : applyHeaderLine(header, headerLine)
        if (problem !== null) {
          headerBroken = true
          problems.push({ line, reason: problem })
        }
        continue
      }
      const expiry = readExpiryComment(read.text)
      if (expiry === null) continue
      orphanExpiry()
      if ('problem' in expiry) problems.push({ line, reason: expiry.problem })
      else pendingExpiry = { line, at: expiry.at }
      continue
    }
    const expiresAt = pendingExpiry
    pendingExpiry = null
    ruleSeen = true
    if (read.kind === 'problem') {
      problems.push({ line, reason: read.reason })
      continue
    }
    const { ptype, values } = read.rule
    if (expiresAt !== null && (ptype !== 'p' || !isUserId(values[0] ?? ''))) problems.push({ line: expiresAt.line, reason: ORPHAN_EXPIRY })
    lines.push({ ptype, values, line, ...(expiresAt !== null ? { expiresAt: expiresAt.at } : {}) })
  }
  orphanExpiry()
  let parsedHeader: FileHeader | null = null
  if (header.format !== undefined && header.scope !== undefined) parsedHeader = { format: header.format, scope: header.scope }
  else if (headerSeen && !headerBroken) {
    problems.push({ line: 1, reason: `the header needs both lines: ${headerLines({ domain: null }).join(' and ')} (or # scope: domain <merchant id>)` })
  }
  return { header: parsedHeader, lines, problems }
}

// ---------------------------------------------------------------- writing

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
