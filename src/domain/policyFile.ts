/**
 * The parts of a policy file that are not Casbin rules: its header (format
 * and scope), the expiry of an override, and the rule that keeps an import
 * from removing most of the policy by mistake. All of them are comment
 * lines, which Casbin's file adapter skips, so the file still loads with
 * `model.conf` and decides exactly as its `p` and `g` lines say.
 *
 *   # policy-format: 1
 *   # scope: all                      (or `# scope: domain m-1`)
 *   p, clerk, m-1, orders, refund, allow
 *   # expires_at 2030-01-31T18:00:00.000Z
 *   p, <user id>, m-1, payouts, approve, allow
 */

/** The format this version writes and reads. */
export const POLICY_FILE_FORMAT = 1

/** What a file holds: every domain (`null`) or one merchant's domain with `global` as context. */
export interface FileScope {
  domain: string | null
}

export interface FileHeader {
  format: number
  scope: FileScope
}

const HEADER_LINE = /^#\s*(policy-format|scope)\s*:\s*(.*?)\s*$/
const EXPIRY_LINE = /^#\s*expires_at\b\s*(.*?)\s*$/
/** RFC 3339 with a zone, as the API's `expires_at` takes it. */
const RFC_3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

const scopeText = (scope: FileScope) => (scope.domain === null ? 'all' : `domain ${scope.domain}`)

/** The header an export writes first. */
export function headerLines(scope: FileScope): string[] {
  return [`# policy-format: ${POLICY_FILE_FORMAT}`, `# scope: ${scopeText(scope)}`]
}

/** The comment written just before an override that expires. */
export const expiryComment = (at: number): string => `# expires_at ${new Date(at).toISOString()}`

/** A header line's key and value, or null for any other line. */
export function readHeaderLine(raw: string): { key: 'policy-format' | 'scope'; value: string } | null {
  const match = HEADER_LINE.exec(raw.trim())
  return match === null ? null : { key: match[1] as 'policy-format' | 'scope', value: match[2] ?? '' }
}

/** Reads one header value into `header`; returns why it cannot be read, or null. */
export function applyHeaderLine(header: Partial<FileHeader>, line: { key: 'policy-format' | 'scope'; value: string }): string | null {
  if (line.key === 'policy-format') {
    if (header.format !== undefined) return 'a second policy-format line'
    if (!/^\d{1,6}$/.test(line.value)) return `policy-format must be a number, not "${line.value}"`
    const format = Number(line.value)
    if (format !== POLICY_FILE_FORMAT) return `policy-format ${format} is not one this version reads (it reads ${POLICY_FILE_FORMAT})`
    header.format = format
    return null
  }
  if (header.scope !== undefined) return 'a second scope line'
  if (line.value === 'all') header.scope = { domain: null }
  else {
    const domain = /^domain\s+(\S+)$/.exec(line.value)?.[1]
    if (domain === undefined) return `scope must be "all" or "domain <merchant id>", not "${line.value}"`
    header.scope = { domain }
  }
  return null
}

/** An `# expires_at` comment's instant (epoch ms), why it cannot be read, or null for any other line. */
export function readExpiryComment(raw: string): { at: number } | { problem: string } | null {
  const match = EXPIRY_LINE.exec(raw.trim())
  if (match === null) return null
  const text = match[1] ?? ''
  const at = RFC_3339.test(text) ? Date.parse(text) : Number.NaN
  if (Number.isNaN(at)) return { problem: `expires_at must be an RFC 3339 instant such as 2030-01-31T18:00:00Z, not "${text}"` }
  return { at }
}

/**
 * Why a file may not be imported with the scope asked for, or null. A file
 * written for one domain, imported as the whole policy, would remove every
 * other domain's rules; a file with no header cannot say what it holds, so it
 * is imported only when the operator says its scope is the one asked for.
 */
export function scopeProblem(header: FileHeader | null, asked: FileScope, headerless: boolean): string | null {
  const flag = asked.domain === null ? 'without --domain' : `with --domain ${asked.domain}`
  if (header === null) {
    if (headerless) return null
    return (
      `the file has no header (# policy-format: ${POLICY_FILE_FORMAT} and # scope: …), so it cannot say which rules it holds; ` +
      `export it again, or pass --allow-headerless to import it as ${asked.domain === null ? 'the whole policy' : `domain ${asked.domain}`}`
    )
  }
  const held = header.scope.domain
  if (held === asked.domain) return null
  if (held === null) return `the file holds the whole policy (# scope: all) and is imported ${flag}: import it without --domain`
  return `the file holds domain ${held} only (# scope: domain ${held}) and is imported ${flag}: import it with --domain ${held}`
}

/** Removals up to this many are never held back, whatever share of the policy they are. */
export const MASS_REMOVAL_HANDFUL = 5
/** The share of the rules in reach an import may remove without --allow-mass-removal. */
export const DEFAULT_MAX_REMOVAL_SHARE = 0.1

export interface MassRemoval {
  removed: number
  inReach: number
  maxShare: number
}

/** The removal when it is more than a handful of rules and more than `maxShare` of the rules in reach, else null. */
export function massRemoval(removed: number, inReach: number, maxShare: number): MassRemoval | null {
  if (removed <= MASS_REMOVAL_HANDFUL || removed <= maxShare * inReach) return null
  return { removed, inReach, maxShare }
}

export function describeMassRemoval(m: MassRemoval): string {
  const percent = (share: number) => `${Math.round(share * 1000) / 10}%`
  return (
    `the import would remove ${m.removed} of the ${m.inReach} rules in its reach (${percent(m.removed / Math.max(m.inReach, 1))}), ` +
    `more than ${MASS_REMOVAL_HANDFUL} and more than ${percent(m.maxShare)}: check the file, then pass --allow-mass-removal ` +
    '(or raise --max-removal-percent) to apply it'
  )
}
