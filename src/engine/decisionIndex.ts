import { GLOBAL_DOMAIN } from '../domain/principals.js'

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

const effectBit = (eft: string | undefined): number => (eft === 'allow' ? ALLOW : eft === 'deny' ? DENY : 0)

const NO_ROLES: readonly string[] = Object.freeze([])

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
  /**
   * domain → subject → the roles it reaches there, worked out on first use
   * and kept until a `g` row changes (assignments change rarely; every check
   * reads them), so a check walks no links and allocates nothing. Grants do
   * not touch it.
   */
  private readonly reached = new Map<string, Map<string, readonly string[]>>()

  static build(policies: Iterable<readonly string[]>, groupings: Iterable<readonly string[]>): DecisionIndex {
    const index = new DecisionIndex()
    for (const rule of policies) index.addPolicy(rule)
    for (const rule of groupings) index.addGrouping(rule)
    return index
  }

  private pairId(obj: string, act: string, create: boolean): number | undefined {
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
    bits.set(id, (bits.get(id) ?? 0) | bit)
  }

  removePolicy(rule: readonly string[]): void {
    const [sub, domain, obj, act, eft] = rule
    const bit = effectBit(eft)
    if (sub === undefined || domain === undefined || obj === undefined || act === undefined || bit === 0) return
    const id = this.pairId(obj, act, false)
    const byDomain = this.grants.get(sub)
    const bits = byDomain?.get(domain)
    if (id === undefined || byDomain === undefined || bits === undefined) return
    const left = (bits.get(id) ?? 0) & ~bit
    if (left !== 0) bits.set(id, left)
    else bits.delete(id)
    if (bits.size === 0) byDomain.delete(domain)
    if (byDomain.size === 0) this.grants.delete(sub)
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
    this.reached.clear()
  }

  removeGrouping(rule: readonly string[]): void {
    const [member, role, domain] = rule
    if (member === undefined || role === undefined || domain === undefined) return
    const members = this.links.get(domain)
    const roles = members?.get(member)
    if (members === undefined || roles === undefined) return
    const left = roles.filter((r) => r !== role)
    if (left.length > 0) members.set(member, left)
    else members.delete(member)
    if (members.size === 0) this.links.delete(domain)
    this.reached.clear()
  }

  /**
   * The roles `subject` reaches by `g` links in `domain`, as Casbin's hasLink
   * follows them. Kept only for subjects that have links there, so the memo
   * is never larger than the `g` rows, whatever domains callers ask about.
   */
  private rolesReached(subject: string, domain: string): readonly string[] {
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
    if (id === undefined) return false
    let effects = this.bits(subject, domain, id) | this.bits(subject, GLOBAL_DOMAIN, id)
    for (const role of this.rolesReached(subject, domain)) {
      effects |= this.bits(role, domain, id) | this.bits(role, GLOBAL_DOMAIN, id)
    }
    if (domain !== GLOBAL_DOMAIN) {
      for (const role of this.rolesReached(subject, GLOBAL_DOMAIN)) effects |= this.bits(role, GLOBAL_DOMAIN, id)
    }
    return effects === ALLOW
  }

  /** The allow and deny rows whose subject is `subject`, in the given domains (no scan of other subjects). */
  rulesOf(subject: string, domains: readonly string[]): IndexedRule[] {
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
