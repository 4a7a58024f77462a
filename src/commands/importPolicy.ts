/**
 * policy import: makes the stored `p` rules what a policy file says (all of
 * them, or those of one domain), in one write. The file format is read in
 * ../domain/policyCsv.ts, its lines checked in ../domain/policyImport.ts, the
 * difference worked out in ../domain/policyDiff.ts; here the store is read,
 * and the difference written, in one transaction.
 *
 * Rules about a pair that is not active in the catalog decide nothing (the
 * engine refuses the pair first) and a file may not name such a pair: export
 * leaves them out and import leaves them where they are, so exporting and
 * importing the same store changes nothing.
 *
 * Expiry: an import sets each override's expiry to the file's (none without
 * a comment) and leaves out an override whose instant has passed, naming it.
 * A file without a header (written before the header existed) carries no
 * expiry: an override whose line it keeps keeps its expiry, and one it adds
 * or changes never expires.
 */
import { SYSTEM_ACTOR, denyEntry, grantEntry, revokeEntry, roleHolder, userHolder, type AuditEntry } from '../domain/audit.js'
import { ruleAdded, ruleRemoved, type StoreChange } from '../domain/changes.js'
import { isDomainName } from '../domain/identifiers.js'
import { isUserId, parsePolicyCsv, type FileLine, type ParsedPolicy } from '../domain/policyCsv.js'
import { diffPolicy, rulesInReach, type PolicyDiff, type StoredPolicy } from '../domain/policyDiff.js'
import { DEFAULT_MAX_REMOVAL_SHARE, describeMassRemoval, massRemoval, scopeProblem, type MassRemoval } from '../domain/policyFile.js'
import { PolicyFileRefused, checkLines, fileError, type ExpiredLine, type LineContext } from '../domain/policyImport.js'
import { GLOBAL_DOMAIN, type Account } from '../domain/principals.js'
import type { Queryable } from '../storage/db.js'
import { findAccountById } from '../storage/accounts.js'
import { merchantExists } from '../storage/merchants.js'
import { deleteOverride, setOverride, type Effect, type OverrideWrite } from '../storage/overrides.js'
import { deleteRules, insertRules } from '../storage/policyRows.js'
import { currentRevision } from '../storage/revision.js'
import { readStoredPolicy } from '../storage/storedPolicy.js'
import { ensureSubRoles } from '../storage/subRoles.js'
import type { CommandContext } from './context.js'
import { overrideExpired } from './sweepExpiredOverrides.js'
import { assertDomainExists } from './permissionContext.js'

/** A policy file larger than this is refused before it is read (about 2,000,000 role lines): an import's rows go in multi-row statements, its size is the database's work. */
export const MAX_POLICY_FILE_BYTES = 96 * 1024 * 1024


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
  for (const d of domains) if (d !== GLOBAL_DOMAIN && isDomainName(d) && (await merchantExists(q, d))) merchants.add(d)
  const accounts = new Map<string, Account>()
  for (const id of users) {
    // A mixed-case id is refused by the checks; it is not looked up under another spelling.
    if (id !== id.toLowerCase()) continue
    // Memory first; an account it does not know yet is read in the same transaction (the embedded
    // store has one connection, so a query beside the transaction would wait for it forever).
    const account = ctx.accounts.peek(id) ?? (await findAccountById(q, id))
    if (account !== null) accounts.set(id, account)
  }
  return { scope, merchants, accounts, isActive: (obj, act) => ctx.engine.isActive(obj, act), pairScope: (obj, act) => ctx.engine.catalogEntry(obj, act)?.scope ?? 'any', roots: ctx.engine, stored, now, fileExpiry }
}

interface Plan {
  diff: PolicyDiff
  expired: ExpiredLine[]
  accounts: ReadonlyMap<string, Account>
  massRemoval: MassRemoval | null
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
  const refused = fileError([...parsed.problems, ...problems])
  if (refused !== null) throw refused
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
  const entry = (action: 'grant' | 'deny' | 'revoke', values: readonly string[]): AuditEntry => {
    const [subject = '', domain = '', obj = '', act = ''] = values
    const holder = isUserId(subject) ? userHolder({ id: subject, merchant_id: accounts.get(subject)?.merchant_id ?? null }) : roleHolder(subject)
    const builder = action === 'grant' ? grantEntry : action === 'deny' ? denyEntry : revokeEntry
    return builder(holder, { obj, act, domain }, SYSTEM_ACTOR)
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

  // Role rows, most of a large file, go in multi-row statements; an override's write reads what it replaces, one at a time.
  const isRoleRow = (values: readonly string[]) => !isUserId(values[0] ?? '')
  const removedRoles = diff.removed.filter(({ values }) => isRoleRow(values)).map(({ values }) => values)
  const gone = await deleteRules(tx, 'p', removedRoles)
  removedRoles.forEach((values, i) => {
    if (gone[i] !== true) return
    audit.push(entry('revoke', values))
    changes.push(ruleRemoved('p', values))
  })
  for (const { values } of diff.removed) {
    if (isRoleRow(values)) continue
    const write = await deleteOverride(tx, overrideKeyOf(values), now)
    expiredOn(write, values.slice(0, 4))
    if (write.previous === null) continue
    audit.push(entry('revoke', values))
    changes.push(ruleRemoved('p', [...values.slice(0, 4), write.previous.effect]))
  }
  const addedRoles = diff.added.filter(({ values }) => isRoleRow(values)).map(({ values }) => values)
  await ensureSubRoles(tx, addedRoles.map((values) => ({ domain: values[1] ?? '', code: values[0] ?? '' })))
  const inserted = await insertRules(tx, 'p', addedRoles)
  addedRoles.forEach((values, i) => {
    if (inserted[i] !== true) return
    audit.push(entry(effectAction(values[4] ?? ''), values))
    changes.push(ruleAdded('p', values))
  })
  for (const { values, expiresAt } of diff.added) if (!isRoleRow(values)) await setUser(values, expiresAt ?? null)
  for (const { to, toExpiresAt } of diff.changed) await setUser(to, toExpiresAt)
  return { audit, changes }
}

/**
 * Makes the stored p rules what the file says, in one write: its rows, an
 * audit entry per change (actor `system`), the change-feed entries other
 * replicas follow, one revision. A file with any line that breaks the rules
 * changes nothing (PolicyFileError names every such line); nor does a file
 * whose header names another scope, a file without a header (unless
 * allowHeaderless), or an import that would remove more than a handful of
 * rules and more than maxRemovalShare of those in reach (unless
 * allowMassRemoval): PolicyFileRefused says why. `g` lines are checked,
 * never applied. The store is read, and the file checked against it, inside
 * the write's own transaction.
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
