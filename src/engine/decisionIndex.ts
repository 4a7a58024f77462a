import { GLOBAL_DOMAIN } from '../domain/principals.js'
import { REASON, type ReasonCode } from './explain.js'
import { inSlices } from './inSlices.js'
import { ReverseIndex } from './reverseIndex.js'

const ALLOW = 1
const DENY = 2
/** Casbin's DefaultRoleManager follows at most this many `g` links (Assertion's `new DefaultRoleManager(10)`). */
const MAX_HIERARCHY = 10

export interface IndexedRule {
  domain: string
  obj: string
  act: string
  effect: 'allow' | 'deny'
}

/** A p row (sub, dom, obj, act, eft) added or removed: what a preview lays over the index without changing it. */
export interface RuleChange {
  op: 'add' | 'remove'
  rule: readonly string[]
}

const effectBit = (eft: string | undefined): number => (eft === 'allow' ? ALLOW : eft === 'deny' ? DENY : 0)

const NO_ROLES: readonly string[] = Object.freeze([])

let clock = 0
/** A number larger than every one handed out before: marks a change, so "changed since" is one comparison. */
export const nextStamp = (): number => ++clock

/** Breadth-first over `g` links from `subject`, at most MAX_HIERARCHY steps, each role once. */
function walkLinks(members: ReadonlyMap<string, readonly string[]>, subject: string): string[] {
  const roles: string[] = []
  const seen = new Set([subject])
  let frontier = [subject]
  for (let depth = 0; depth < MAX_HIERARCHY && frontier.length > 0; depth++) {
    const next: string[] = []
    for (const name of frontier) {
      for (const role of members.get(name) ?? []) {
        if (seen.has(role)) continue
        seen.add(role)
        next.push(role)
      }
    }
    roles.push(...next)
    frontier = next
  }
  return roles
}

/**
 * The decisions of model.conf as hash look-ups. For each subject (a sub-role
 * or a user id) and domain it keeps the allow and deny bits of every pair its
 * own p rows name; a question folds in, with a fixed handful of look-ups, the
 * rows reaching the user the way the matcher says: the subject and the roles
 * it reaches by `g` in the requested domain, with their rows in that domain
 * and in `global`, plus the roles it reaches in `global` with their `global`
 * rows. Any deny beats every allow. Strings are the policy rows' own, shared
 * with the Casbin model, so the index adds little memory per rule.
 */
export class DecisionIndex {
  /** obj → act → pair id */
  private readonly pairIds = new Map<string, Map<string, number>>()
  private readonly pairs: Array<readonly [string, string]> = []
  /** subject → domain → pair id → effect bits */
  private readonly grants = new Map<string, Map<string, Map<number, number>>>()
  /** domain → member → roles it is assigned (Casbin `g` links) */
  private readonly links = new Map<string, Map<string, string[]>>()
  /** Who holds a pair, and who reaches a role: the reverse look-ups, kept in step with the rows. */
  private readonly reverse = new ReverseIndex()
  /**
   * domain → subject → the roles it reaches there, worked out on first use
   * and kept until a `g` row changes (assignments change rarely; every check
   * reads them), so a check walks no links and allocates nothing. Grants do
   * not touch it.
   */
  private readonly reached = new Map<string, Map<string, readonly string[]>>()
  /** Marks the latest change of these rows (nextStamp): answers worked out from them stay good while it stays. */
  stamp = nextStamp()
  /**
   * The p rows still to file when their part of the index is built in the
   * background (see deferringPolicies): read from `source` at the first
   * slice, filed from `next` on. Null once every row is filed.
   */
  private deferred: { source: () => Iterable<readonly string[]>; rows: ReadonlyArray<readonly string[]> | null; next: number } | null = null

  static build(policies: Iterable<readonly string[]>, groupings: Iterable<readonly string[]>): DecisionIndex {
    const index = new DecisionIndex()
    for (const rule of policies) index.addPolicy(rule)
    for (const rule of groupings) index.addGrouping(rule)
    return index
  }

  /**
   * An index whose role links are built now and whose p rows are filed in
   * the background (inSlices). For an edited model, whose decisions come
   * from the candidate index and read only the links here: a load is then ready without a second index of
   * every p row. Whatever reads grants (holders, effective permissions,
   * previews) or changes a p row before the last slice finishes the rest
   * at once. `policies` gives the rows as they are when it is called.
   */
  static deferringPolicies(policies: () => Iterable<readonly string[]>, groupings: Iterable<readonly string[]>): DecisionIndex {
    const index = DecisionIndex.build([], groupings)
    index.deferred = { source: policies, rows: null, next: 0 }
    inSlices((count) => index.fileDeferred(count))
    return index
  }

  /** Files up to `count` of the deferred p rows; whether none is left. */
  private fileDeferred(count: number): boolean {
    const deferred = this.deferred
    if (deferred === null) return true
    deferred.rows ??= [...deferred.source()]
    const { rows } = deferred
    const end = Math.min(rows.length, deferred.next + count)
    const stamp = this.stamp
    this.deferred = null
    for (let i = deferred.next; i < end; i++) this.addPolicy(rows[i] as readonly string[])
    // The same rows as before: answers worked out from them stay good.
    this.stamp = stamp
    deferred.next = end
    if (end < rows.length) this.deferred = deferred
    return this.deferred === null
  }

  /** Files every deferred p row now. */
  private policiesReady(): void {
    if (this.deferred !== null) this.fileDeferred(Number.POSITIVE_INFINITY)
  }

  private pairId(obj: string, act: string, create: boolean): number | undefined {
    if (!create) this.policiesReady()
    let acts = this.pairIds.get(obj)
    if (acts === undefined) {
      if (!create) return undefined
      acts = new Map()
      this.pairIds.set(obj, acts)
    }
    let id = acts.get(act)
    if (id === undefined && create) {
      id = this.pairs.length
      this.pairs.push([obj, act])
      acts.set(act, id)
    }
    return id
  }

  /** A p row: sub, dom, obj, act, eft. */
  addPolicy(rule: readonly string[]): void {
    this.policiesReady()
    const [sub, domain, obj, act, eft] = rule
    const bit = effectBit(eft)
    if (sub === undefined || domain === undefined || obj === undefined || act === undefined || bit === 0) return
    const id = this.pairId(obj, act, true) as number
    let byDomain = this.grants.get(sub)
    if (byDomain === undefined) {
      byDomain = new Map()
      this.grants.set(sub, byDomain)
    }
    let bits = byDomain.get(domain)
    if (bits === undefined) {
      bits = new Map()
      byDomain.set(domain, bits)
    }
    const held = bits.get(id) ?? 0
    bits.set(id, held | bit)
    this.stamp = nextStamp()
    if (bit === ALLOW && (held & ALLOW) === 0) this.reverse.allowAdded(id, sub)
  }

  removePolicy(rule: readonly string[]): void {
    this.policiesReady()
    const [sub, domain, obj, act, eft] = rule
    const bit = effectBit(eft)
    if (sub === undefined || domain === undefined || obj === undefined || act === undefined || bit === 0) return
    const id = this.pairId(obj, act, false)
    const byDomain = this.grants.get(sub)
    const bits = byDomain?.get(domain)
    if (id === undefined || byDomain === undefined || bits === undefined) return
    const held = bits.get(id) ?? 0
    const left = held & ~bit
    this.stamp = nextStamp()
    if (left !== 0) bits.set(id, left)
    else bits.delete(id)
    if (bits.size === 0) byDomain.delete(domain)
    if (byDomain.size === 0) this.grants.delete(sub)
    if (bit === ALLOW && (held & ALLOW) !== 0) this.reverse.allowRemoved(id, sub)
  }

  /** Whether this p row is held; undefined for a row the index does not keep (an effect other than allow or deny). */
  hasPolicy(rule: readonly string[]): boolean | undefined {
    const [sub, domain, obj, act, eft] = rule
    const bit = effectBit(eft)
    if (sub === undefined || domain === undefined || obj === undefined || act === undefined || bit === 0 || rule.length !== 5) return undefined
    const id = this.pairId(obj, act, false)
    return id !== undefined && (this.bits(sub, domain, id) & bit) !== 0
  }

  /** Whether this g row is held; undefined for a row that is not member, role, domain. */
  hasGrouping(rule: readonly string[]): boolean | undefined {
    const [member, role, domain] = rule
    if (member === undefined || role === undefined || domain === undefined || rule.length !== 3) return undefined
    return this.links.get(domain)?.get(member)?.includes(role) === true
  }

  /** A g row: member, role, domain. */
  addGrouping(rule: readonly string[]): void {
    const [member, role, domain] = rule
    if (member === undefined || role === undefined || domain === undefined) return
    let members = this.links.get(domain)
    if (members === undefined) {
      members = new Map()
      this.links.set(domain, members)
    }
    const roles = members.get(member)
    if (roles === undefined) members.set(member, [role])
    else if (!roles.includes(role)) roles.push(role)
    else return
    this.reverse.linkAdded(member, role, domain)
    this.reached.clear()
    this.stamp = nextStamp()
  }

  removeGrouping(rule: readonly string[]): void {
    const [member, role, domain] = rule
    if (member === undefined || role === undefined || domain === undefined) return
    const members = this.links.get(domain)
    const roles = members?.get(member)
    if (members === undefined || roles === undefined || !roles.includes(role)) return
    const left = roles.filter((r) => r !== role)
    if (left.length > 0) members.set(member, left)
    else members.delete(member)
    if (members.size === 0) this.links.delete(domain)
    this.reverse.linkRemoved(member, role, domain)
    this.reached.clear()
    this.stamp = nextStamp()
  }

  /**
   * The roles `subject` reaches by `g` links in `domain`, as Casbin's hasLink
   * follows them. Kept only for subjects that have links there, so the memo
   * is never larger than the `g` rows, whatever domains callers ask about.
   */
  rolesReached(subject: string, domain: string): readonly string[] {
    const members = this.links.get(domain)
    if (members === undefined || !members.has(subject)) return NO_ROLES
    let bySubject = this.reached.get(domain)
    let roles = bySubject?.get(subject)
    if (roles !== undefined) return roles
    roles = walkLinks(members, subject)
    if (bySubject === undefined) {
      bySubject = new Map()
      this.reached.set(domain, bySubject)
    }
    bySubject.set(subject, roles)
    return roles
  }

  private bits(subject: string, domain: string, id: number): number {
    return this.grants.get(subject)?.get(domain)?.get(id) ?? 0
  }

  /** What `enforce(subject, domain, obj, act)` answers under model.conf. */
  allowed(subject: string, domain: string, obj: string, act: string): boolean {
    const id = this.pairId(obj, act, false)
    return id !== undefined && this.fold(subject, domain, obj, act, id, null) === ALLOW
  }

  /**
   * The fold's first sources of a deny and of an allow (subject and domain
   * of the row), the subject's own rows first, and the pair last folded:
   * what reason() read, kept in fields so that a decision allocates nothing
   * and the deciding row is put together only when asked (decidingRow).
   */
  private denyBy: string | null = null
  private denyIn = ''
  private allowBy: string | null = null
  private allowIn = ''
  private askedObj = ''
  private askedAct = ''

  /**
   * `allowed`'s answer and why, from the one fold: any deny beats every
   * allow, and the subject's own row (an override) is named before a
   * role's when both say the same. decidingRow() gives that row until the
   * next question.
   */
  reason(subject: string, domain: string, obj: string, act: string): ReasonCode {
    const id = this.pairId(obj, act, false)
    this.askedObj = obj
    this.askedAct = act
    if (id === undefined) {
      this.denyBy = null
      this.allowBy = null
      return REASON.none
    }
    const effects = this.fold(subject, domain, obj, act, id, null)
    if ((effects & DENY) !== 0) return this.denyBy === subject ? REASON.user_deny : REASON.role_deny
    if (effects !== 0) return this.allowBy === subject ? REASON.user_allow : REASON.role
    return REASON.none
  }

  /** The p row that decided the last reason() (a deny when one reached it, else an allow), or null. */
  decidingRow(): string[] | null {
    if (this.denyBy !== null) return [this.denyBy, this.denyIn, this.askedObj, this.askedAct, 'deny']
    if (this.allowBy !== null) return [this.allowBy, this.allowIn, this.askedObj, this.askedAct, 'allow']
    return null
  }

  /**
   * The model's fold, the one place that says which rows reach a question:
   * the effect bits of every row reaching `subject` in `domain` the way the
   * matcher says (its own rows and those of the roles it reaches there, in
   * the domain and in `global`; the roles it reaches in `global`, with
   * their `global` rows), `changes` laid over them when given. The first
   * source of a deny and of an allow, in that order (the subject's own
   * first), are kept for reason().
   */
  private fold(
    subject: string,
    domain: string,
    obj: string,
    act: string,
    id: number | undefined,
    changes: readonly RuleChange[] | null,
  ): number {
    this.denyBy = null
    this.allowBy = null
    let effects = this.source(subject, domain, obj, act, id, changes) | this.source(subject, GLOBAL_DOMAIN, obj, act, id, changes)
    for (const role of this.rolesReached(subject, domain)) {
      effects |= this.source(role, domain, obj, act, id, changes) | this.source(role, GLOBAL_DOMAIN, obj, act, id, changes)
    }
    if (domain !== GLOBAL_DOMAIN) {
      for (const role of this.rolesReached(subject, GLOBAL_DOMAIN)) effects |= this.source(role, GLOBAL_DOMAIN, obj, act, id, changes)
    }
    return effects
  }

  /** One source's bits in the fold; the first deny and the first allow are kept (see reason()). */
  private source(
    sub: string,
    dom: string,
    obj: string,
    act: string,
    id: number | undefined,
    changes: readonly RuleChange[] | null,
  ): number {
    const bits = this.bitsWith(sub, dom, obj, act, id, changes)
    if ((bits & DENY) !== 0 && this.denyBy === null) {
      this.denyBy = sub
      this.denyIn = dom
    }
    if ((bits & ALLOW) !== 0 && this.allowBy === null) {
      this.allowBy = sub
      this.allowIn = dom
    }
    return bits
  }

  /** One subject's bits of the pair in one domain; rows are unique, so adding one sets its effect's bit and removing one clears it. */
  private bitsWith(sub: string, dom: string, obj: string, act: string, id: number | undefined, changes: readonly RuleChange[] | null): number {
    let held = id === undefined ? 0 : this.bits(sub, dom, id)
    if (changes === null) return held
    for (const { op, rule } of changes) {
      if (rule[0] !== sub || rule[1] !== dom || rule[2] !== obj || rule[3] !== act || rule.length !== 5) continue
      const bit = effectBit(rule[4])
      held = op === 'add' ? held | bit : held & ~bit
    }
    return held
  }

  /**
   * What `allowed` would answer with `changes` (p rows) applied, the index
   * itself left as it is.
   */
  allowedAfter(subject: string, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    return this.fold(subject, domain, obj, act, this.pairId(obj, act, false), changes) === ALLOW
  }

  /** Whether `subject` has an allow row of the pair in `domain`. */
  allows(subject: string, domain: string, obj: string, act: string): boolean {
    const id = this.pairId(obj, act, false)
    return id !== undefined && (this.bits(subject, domain, id) & ALLOW) !== 0
  }

  /**
   * Every subject (a sub-role or a user id) with an allow row of the pair in
   * `domain` or in `global`: every holder reaches one of them. It tests the
   * subjects with an allow of the pair anywhere, not every subject.
   */
  allowersOf(obj: string, act: string, domain: string): string[] {
    const id = this.pairId(obj, act, false)
    if (id === undefined) return []
    const found: string[] = []
    for (const subject of this.reverse.subjectsAllowing(id)) {
      const byDomain = this.grants.get(subject)
      if ((((byDomain?.get(domain)?.get(id) ?? 0) | (byDomain?.get(GLOBAL_DOMAIN)?.get(id) ?? 0)) & ALLOW) !== 0) found.push(subject)
    }
    return found
  }

  /** Adds to `into` every member reaching one of `roles` by `g` links in `domain`, the roles themselves included (see ReverseIndex). */
  membersReaching(roles: Iterable<string>, domain: string, into: Set<string>): Set<string> {
    return this.reverse.membersReaching(roles, domain, into)
  }

  /** The domains that have `g` links. */
  linkDomains(): IterableIterator<string> {
    return this.reverse.linkDomains()
  }

  /** The allow and deny rows whose subject is `subject`, in the given domains (no scan of other subjects). */
  rulesOf(subject: string, domains: readonly string[]): IndexedRule[] {
    this.policiesReady()
    const byDomain = this.grants.get(subject)
    if (byDomain === undefined) return []
    const result: IndexedRule[] = []
    for (const domain of domains) {
      for (const [id, bits] of byDomain.get(domain) ?? []) {
        const [obj, act] = this.pairs[id] as readonly [string, string]
        if ((bits & ALLOW) !== 0) result.push({ domain, obj, act, effect: 'allow' })
        if ((bits & DENY) !== 0) result.push({ domain, obj, act, effect: 'deny' })
      }
    }
    return result
  }
}
