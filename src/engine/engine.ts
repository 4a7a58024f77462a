import { PolicyOp, newEnforcer, newModelFromString, type Adapter, type Enforcer, type Model } from 'casbin'
import type { CatalogEntry } from '../domain/permissions.js'
import type { PrincipalType } from '../domain/principals.js'
import type { Queryable } from '../storage/db.js'
import { RulesAdapter, StorageAdapter, type PolicyRules } from './adapter.js'
import { DecisionIndex, nextStamp, type IndexedRule, type RuleChange } from './decisionIndex.js'
import { explained, type Explanation } from './explain.js'
import { withRowsChanged } from './overlay.js'
import { REFERENCE_MODEL, parseModel } from './model.js'
import { OverrideExpiries } from './overrideExpiryQueue.js'
import { CandidateIndex } from './candidateIndex.js'
import { CompiledModel, type RoleFunction } from './compiledModel.js'
import { readMatcher, type MatcherReading } from './matcherAnalysis.js'
import { appendRow, hasRow, indexRowsSoon, removeRows } from './modelRows.js'
import { LazyPolicyList } from './lazyPolicyList.js'

/** What a decision needs to know about the user asking. */
export interface Subject {
  id: string
  principal_type: PrincipalType
  merchant_id: string | null
  sub_role_code: string
  /** A deactivated account holds nothing. */
  status?: string
}

export const pairKey = (obj: string, act: string): string => `${obj}\u0000${act}`

/** Everything the engine needs from the store besides the policy rows. */
export interface EngineState {
  rootRoles: Iterable<string>
  catalog: Iterable<CatalogEntry>
}

/**
 * 'index': the shipped model's decision index. 'candidates': a model whose
 * every matcher alternative ties the policy's subject to the requester,
 * decided by Casbin's matcher and effect over the rows that can match only
 * (see CandidateIndex). 'enforce-cache': any other model, enforce() over
 * every row, with a cache.
 */
export type DecisionMode = 'index' | 'candidates' | 'enforce-cache'

/** What holders and previews read of the loaded policy's rows. */
export type PolicyView = Pick<DecisionIndex, 'allowersOf' | 'allows' | 'hasPolicy' | 'linkDomains' | 'membersReaching'>

/** obj → act → entry: looked up on every decision, so no key string is built per question. */
type Catalog = Map<string, Map<string, CatalogEntry>>

/** One loaded policy: Casbin's enforcer and the index built from the same rows. Swapped whole on reload. */
interface LoadedPolicy {
  enforcer: Enforcer
  index: DecisionIndex
  /**
   * Decisions of Casbin's enforce() ('enforce-cache' mode, or 'candidates'
   * with a matcher not compiled); cleared on every change. Null when a
   * decision is cheaper than a look-up here: the index, or the compiled
   * matcher over the candidates.
   */
  cache: Map<string, boolean> | null
  /** When the loaded overrides that expire stop counting. */
  expiries: OverrideExpiries
  /** The rows each question can match, in 'candidates' mode. */
  narrowing: Narrowing | null
}

/** What 'candidates' mode keeps beside the enforcer. */
interface Narrowing {
  index: CandidateIndex
  /** What the effect answers when no row matches (Casbin over a list none of whose rows match). */
  noMatch: boolean
  /** The model's matcher and effect compiled; null leaves the candidates to Casbin's enforce. */
  compiled: CompiledModel | null
  /** Casbin's p list, built from the index when read after a write. */
  list: LazyPolicyList
}

/**
 * The model's role functions as Casbin's synchronous g function answers
 * them: a three-field `g` with a domain from the index's links (the very
 * rows Casbin's role manager holds, followed as deep as it follows them),
 * any other from the enforcer's role manager.
 */
function roleFunctions(enforcer: Enforcer, index: DecisionIndex): Map<string, RoleFunction> {
  const functions = new Map<string, RoleFunction>()
  for (const [key, assertion] of enforcer.getModel().model.get('g') ?? []) {
    const rm = assertion.rm
    const indexed = key === 'g' && assertion.value.split(',').length === 3
    functions.set(key, (...args: unknown[]) => {
      // As Casbin's generateSyncedGFunction reads its arguments.
      const name1 = String(args[0] || '')
      const name2 = String(args[1] || '')
      if (args.length === 2) return rm.syncedHasLink?.(name1, name2) ?? name1 === name2
      const domain = (args[2] as { toString(): string }).toString()
      if (indexed && args.length === 3) return name1 === name2 || index.rolesReached(name1, domain).includes(name2)
      return rm.syncedHasLink?.(name1, name2, domain) ?? name1 === name2
    })
  }
  return functions
}

const settledBy = (allowed: boolean, kind: Explanation['reason']['kind']): Explanation => Object.freeze({ allowed, reason: Object.freeze({ kind }) })
const SETTLED = {
  deactivated: settledBy(false, 'none'),
  notInCatalog: settledBy(false, 'not_in_catalog'),
  outsideHome: settledBy(false, 'outside_home_domain'),
  root: settledBy(true, 'root'),
} as const

/** Which mode a model gets. */
function modeOf(model: Model, matcher: MatcherReading): DecisionMode {
  if (isReferenceModel(model)) return 'index'
  return matcher.alternatives === null ? 'enforce-cache' : 'candidates'
}

/**
 * The model's answer when no row matches: asked of Casbin on one row no
 * request can match (its subject is tied to nothing and named by no link).
 */
async function noMatchAnswer(modelText: string): Promise<boolean> {
  const enforcer = await newEnforcer(parseModel(modelText))
  await enforcer.addPolicy('\u0000no-subject', '\u0000', '\u0000', '\u0000', 'allow')
  return enforcer.enforceSync('\u0001someone', '\u0001', '\u0001', '\u0001')
}

const sections = ['r', 'p', 'g', 'e', 'm'] as const

/** Decisions kept by the enforce() fallback before it starts again (about 15 MB). */
export const DECISION_CACHE_LIMIT = 100_000

/** Whether the model decides exactly as the reference model.conf (compared after Casbin's own parsing). */
export function isReferenceModel(model: Model): boolean {
  const reference = newModelFromString(REFERENCE_MODEL)
  const value = (m: Model, sec: string) => m.model.get(sec)?.get(sec)?.value.replace(/\s+/g, '')
  return sections.every((sec) => value(model, sec) === value(reference, sec))
}

/**
 * Casbin's enforcer plus what a decision needs outside it (which sub-roles
 * are root, which pairs are active in the catalog). Casbin's model decides
 * every non-root answer; the decision index answers the same questions as
 * hash look-ups. Changes are applied in memory after their commit.
 */
export class PermissionEngine {
  /** Told when the soonest expiry may have moved (a change or a reload). */
  private expiryWatcher: (() => void) | null = null

  private constructor(
    private loaded: LoadedPolicy,
    private readonly modelText: string,
    /** The matcher read once, when the engine is made: every reload reuses it. */
    private readonly matcher: MatcherReading,
    readonly mode: DecisionMode,
    private rootRoles: Set<string>,
    private catalog: Catalog,
    private readonly now: () => number,
  ) {}

  /** `now` is the clock expiries are read against (a test's clock, or the system's). */
  static async load(db: Queryable, modelText: string, state: EngineState, now: () => number = Date.now): Promise<PermissionEngine> {
    const model = parseModel(modelText)
    const matcher = readMatcher(model)
    const mode = modeOf(model, matcher)
    const loaded = await PermissionEngine.loadPolicy(db, modelText, matcher, mode, now())
    return new PermissionEngine(loaded, modelText, matcher, mode, new Set(state.rootRoles), PermissionEngine.catalogMap(state.catalog), now)
  }

  /** An engine over rules already in memory (a policy file, a decisions file's policy): the decisions the service would take on them. */
  static async fromRules(modelText: string, rules: PolicyRules, state: EngineState = { rootRoles: [], catalog: [] }): Promise<PermissionEngine> {
    const model = parseModel(modelText)
    const matcher = readMatcher(model)
    const mode = modeOf(model, matcher)
    const loaded = await PermissionEngine.loadedPolicyFrom(new RulesAdapter(rules), new OverrideExpiries(), modelText, matcher, mode)
    return new PermissionEngine(loaded, modelText, matcher, mode, new Set(state.rootRoles), PermissionEngine.catalogMap(state.catalog), Date.now)
  }

  private static async loadPolicy(db: Queryable, modelText: string, matcher: MatcherReading, mode: DecisionMode, now: number): Promise<LoadedPolicy> {
    const expiries = new OverrideExpiries()
    const adapter = new StorageAdapter(db, { now, onExpiring: (values, at) => expiries.set(values, at) })
    return PermissionEngine.loadedPolicyFrom(adapter, expiries, modelText, matcher, mode)
  }

  private static async loadedPolicyFrom(
    adapter: Adapter,
    expiries: OverrideExpiries,
    modelText: string,
    matcher: MatcherReading,
    mode: DecisionMode,
  ): Promise<LoadedPolicy> {
    const enforcer = await newEnforcer(parseModel(modelText), adapter)
    enforcer.enableAutoSave(false)
    const model = enforcer.getModel().model
    const rows = model.get('p')?.get('p')?.policy ?? []
    const groupings = model.get('g')?.get('g')?.policy ?? []
    let candidates: CandidateIndex | null = null
    // An edited model decides from the candidate index: the p part of this one is filed in the background.
    const index =
      mode === 'candidates' ? DecisionIndex.deferringPolicies(() => candidates?.ordered() ?? rows, groupings) : DecisionIndex.build(rows, groupings)
    // Built in the background once loaded, so neither the load nor (most likely) the first write after it waits for them.
    if (mode === 'index') indexRowsSoon(enforcer.getModel())
    if (mode === 'candidates') indexRowsSoon(enforcer.getModel(), ['g'])
    const alternatives = mode === 'candidates' ? matcher.alternatives : null
    const compiled = alternatives === null ? null : CompiledModel.compile(enforcer.getModel(), matcher, roleFunctions(enforcer, index))
    let narrowing: Narrowing | null = null
    if (alternatives !== null) {
      const narrowed = new CandidateIndex(alternatives, rows)
      candidates = narrowed
      const noMatch = compiled === null ? await noMatchAnswer(modelText) : compiled.noMatch()
      narrowing = { index: narrowed, noMatch, compiled, list: new LazyPolicyList(enforcer.getModel(), () => narrowed.ordered()) }
    }
    // A compiled candidates decision costs less than the cache's key (a string of the question, hashed): only Casbin's enforce() is worth caching.
    const cached = mode === 'enforce-cache' || (mode === 'candidates' && compiled === null)
    return { enforcer, index, cache: cached ? new Map() : null, expiries, narrowing }
  }

  private static catalogMap(entries: Iterable<CatalogEntry>): Catalog {
    const catalog: Catalog = new Map()
    for (const entry of entries) {
      let acts = catalog.get(entry.obj)
      if (acts === undefined) {
        acts = new Map()
        catalog.set(entry.obj, acts)
      }
      acts.set(entry.act, { ...entry })
    }
    return catalog
  }

  /** Builds a new enforcer and index off to the side and swaps them in at once: no check sees a partial policy. */
  async reload(db: Queryable, state: EngineState): Promise<void> {
    const loaded = await PermissionEngine.loadPolicy(db, this.modelText, this.matcher, this.mode, this.now())
    this.loaded = loaded
    this.rootRoles = new Set(state.rootRoles)
    this.catalog = PermissionEngine.catalogMap(state.catalog)
    this.expiryWatcher?.()
  }

  /** `watcher` is called whenever the soonest expiry may have moved. */
  watchExpiries(watcher: (() => void) | null): void {
    this.expiryWatcher = watcher
  }

  /** The soonest instant at which a loaded override stops counting, or null. */
  nextExpiry(): number | null {
    return this.loaded.expiries.next()
  }

  /** When this user's override of the pair in `domain` stops counting; null when it does not expire (or is not there). */
  overrideExpiresAt(userId: string, domain: string, obj: string, act: string): number | null {
    return this.loaded.expiries.at(userId, domain, obj, act)
  }

  /** Takes every override whose instant has passed out of the decisions; returns their rows. */
  async expireDue(): Promise<Array<readonly string[]>> {
    const due = this.loaded.expiries.takeDue(this.now())
    for (const values of due) await this.removeRule('p', values)
    return due
  }

  isRootRole(code: string): boolean {
    return this.rootRoles.has(code)
  }

  isActive(obj: string, act: string): boolean {
    return this.catalog.get(obj)?.get(act)?.is_active === true
  }

  catalogEntry(obj: string, act: string): CatalogEntry | undefined {
    return this.catalog.get(obj)?.get(act)
  }

  catalogEntries(): CatalogEntry[] {
    return [...this.catalog.values()].flatMap((acts) => [...acts.values()])
  }

  replaceCatalog(entries: Iterable<CatalogEntry>): void {
    this.catalog = PermissionEngine.catalogMap(entries)
    this.settingsStamp = nextStamp()
  }

  setRootRole(code: string, isRoot: boolean): void {
    if (isRoot) this.rootRoles.add(code)
    else this.rootRoles.delete(code)
    this.settingsStamp = nextStamp()
  }

  /**
   * Grows with every change that may move a decision: a rule or a link (the
   * index's stamp), a reload (a new index), the catalog or a root sub-role.
   * What was worked out from the policy at one generation holds while it lasts.
   */
  get generation(): number {
    return Math.max(this.settingsStamp, this.loaded.index.stamp)
  }

  /** Casbin alone (a linear scan of the policy): for the differential test and tools, never on a request path. */
  enforce(subjectId: string, domain: string, obj: string, act: string): boolean {
    return this.loaded.enforcer.enforceSync(subjectId, domain, obj, act)
  }

  /**
   * The model's answer as a decision pays for it when nothing is cached (a
   * write clears the cache): the index, the compiled matcher over the
   * candidates, or enforce() for other models. No tenant, root or catalog rule.
   */
  uncachedModelAllows(subjectId: string, domain: string, obj: string, act: string): boolean {
    return this.mode === 'index' ? this.loaded.index.allowed(subjectId, domain, obj, act) : this.narrowedEnforce(subjectId, domain, obj, act, false)[0]
  }

  /**
   * Casbin's enforce (or enforceEx) over the rows the question can match
   * only, in 'candidates' mode: the model's list is swapped for the
   * candidates, in the list's order, for the synchronous call and put back
   * before anything else runs. Rows left out cannot match (their subject is
   * neither the requester nor a role it reaches where the matcher asks, or
   * a pinned field differs), so Casbin's matcher and effect decide as over
   * the whole list. Other modes: the whole list.
   */
  private narrowedEnforce(subjectId: string, domain: string, obj: string, act: string, explain: boolean): [boolean, readonly string[]] {
    const { narrowing } = this.loaded
    // An empty list is read by Casbin otherwise (the matcher over empty fields): asked of Casbin, at no cost.
    if (narrowing === null || narrowing.index.size === 0) return this.casbin(subjectId, domain, obj, act, explain)
    // Read synchronously by the index and the compiled matcher only: one array serves every question.
    const request = this.request
    request[0] = subjectId
    request[1] = domain
    request[2] = obj
    request[3] = act
    const rows = narrowing.index.candidates(request, this.loaded.index)
    if (rows.length === 0) return [narrowing.noMatch, []]
    if (narrowing.compiled !== null) {
      const [allowed, row] = narrowing.compiled.decide(request, rows)
      return [allowed, row ?? []]
    }
    return narrowing.list.withList([...rows] as string[][], () => this.casbin(subjectId, domain, obj, act, explain))
  }

  /** Casbin's enforce, or enforceEx when the row is asked for. */
  private casbin(subjectId: string, domain: string, obj: string, act: string, explain: boolean): [boolean, readonly string[]] {
    const { enforcer } = this.loaded
    return explain ? enforcer.enforceExSync(subjectId, domain, obj, act) : [enforcer.enforceSync(subjectId, domain, obj, act), []]
  }

  /**
   * The loaded policy's rows (p rows with the overrides, g rows), read only.
   * Read them before the next write: in 'candidates' mode the p list a write
   * leaves behind is built again on the next read, and the one read before
   * may be the candidate index's own (holes where rows were removed).
   */
  get loadedRules(): { readonly p: readonly (readonly string[])[]; readonly g: readonly (readonly string[])[] } {
    const model = this.loaded.enforcer.getModel().model
    return { p: model.get('p')?.get('p')?.policy ?? [], g: model.get('g')?.get('g')?.policy ?? [] }
  }

  /** The model's answer without tenant, root or catalog rules: the index, the compiled matcher over the candidates, or cached enforce(). */
  private modelAllows(subjectId: string, domain: string, obj: string, act: string): boolean {
    const { index, cache } = this.loaded
    if (this.mode === 'index') return index.allowed(subjectId, domain, obj, act)
    if (cache === null) return this.narrowedEnforce(subjectId, domain, obj, act, false)[0]
    const key = `${subjectId}\u0000${domain}\u0000${pairKey(obj, act)}`
    let answer = cache.get(key)
    if (answer === undefined) {
      answer = this.narrowedEnforce(subjectId, domain, obj, act, false)[0]
      // Callers choose the domain they ask about: the cache must not grow without bound.
      if (cache.size >= DECISION_CACHE_LIMIT) cache.clear()
      cache.set(key, answer)
    }
    return answer
  }

  /**
   * What a user holding only `subRole`, at home in `domain`, would be allowed
   * there: the sub-role asked as the subject. Root sub-roles hold everything.
   */
  subRoleAllows(subRole: string, domain: string, obj: string, act: string): boolean {
    if (!this.isActive(obj, act)) return false
    return this.rootRoles.has(subRole) || this.modelAllows(subRole, domain, obj, act)
  }

  /** The one decision every path uses: route guard, check endpoints, effective sets. */
  decide(subject: Subject, domain: string, obj: string, act: string): boolean {
    const settled = this.settledOutsideModel(subject, domain, obj, act)
    return settled === null ? this.modelAllows(subject.id, domain, obj, act) : settled.allowed
  }

  /**
   * The rules every decision applies before the model (a deactivated
   * account holds nothing, only active catalog pairs, a merchant user only
   * in its merchant, a root sub-role everything): the answer and its reason
   * when one of them settles the question, else null. Shared constants: the
   * hot path allocates nothing.
   */
  private settledOutsideModel(subject: Subject, domain: string, obj: string, act: string): Explanation | null {
    if (subject.status === 'deactivated') return SETTLED.deactivated
    if (!this.isActive(obj, act)) return SETTLED.notInCatalog
    if (subject.principal_type === 'merchant' && subject.merchant_id !== domain) return SETTLED.outsideHome
    if (this.rootRoles.has(subject.sub_role_code)) return SETTLED.root
    return null
  }

  /**
   * decide() and why: the tenant, root and catalog rules first, then the p
   * row that decided. The index names the row itself; for another model,
   * Casbin's enforceEx. Off the hot path: only `explain=true` asks.
   */
  explain(subject: Subject, domain: string, obj: string, act: string): Explanation {
    const settled = this.settledOutsideModel(subject, domain, obj, act)
    if (settled !== null) return { allowed: settled.allowed, reason: { kind: settled.reason.kind } }
    const { index } = this.loaded
    if (this.mode === 'index') return explained(subject.id, index.allowed(subject.id, domain, obj, act), index.decidingRule(subject.id, domain, obj, act))
    const [allowed, rule] = this.narrowedEnforce(subject.id, domain, obj, act, true)
    return explained(subject.id, allowed, rule.length > 0 ? [...rule] : null)
  }

  /**
   * What decide() would answer with the p rows of `changes` added or
   * removed (a preview). The live policy, every other answer and the
   * decision cache stay as they are: the index answers with the rows laid
   * over it; 'candidates' mode with the rows laid over the question's
   * candidates (narrowedAfter); another model is asked synchronously with
   * the rows changed and put back before anything else runs.
   */
  decideAfter(subject: Subject, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    const settled = this.settledOutsideModel(subject, domain, obj, act)
    if (settled !== null) return settled.allowed
    const { enforcer, index, narrowing } = this.loaded
    if (this.mode === 'index') return index.allowedAfter(subject.id, domain, obj, act, changes)
    const narrowed = narrowing === null ? null : this.narrowedAfter(narrowing, [subject.id, domain, obj, act], changes)
    return narrowed ?? withRowsChanged(enforcer.getModel(), changes, () => enforcer.enforceSync(subject.id, domain, obj, act))
  }

  /**
   * decideAfter in 'candidates' mode without touching the list: the
   * question's candidate rows with the changes laid over them, as
   * withRowsChanged lays them over the whole list (in order: an add not
   * held is appended after every row, a remove takes the row out), then the
   * model's matcher and effect over those rows only. Appended rows all go
   * in: the matcher decides which match. Null when the list is empty before
   * or after the change (Casbin reads an empty list otherwise).
   */
  private narrowedAfter(narrowing: Narrowing, request: string[], changes: readonly RuleChange[]): boolean | null {
    // The index's count, not Casbin's list: reading the list after a write would build it again.
    const size = narrowing.index.size
    if (size === 0) return null
    const key = (row: readonly string[]) => row.join('\u0000')
    const removed = new Set<string>()
    const appended: Array<readonly string[]> = []
    for (const { op, rule } of changes) {
      const k = key(rule)
      const at = appended.findIndex((row) => key(row) === k)
      const held = at >= 0 || (!removed.has(k) && narrowing.index.has(rule))
      if (op === 'add' && !held) appended.push([...rule])
      else if (op === 'remove' && held) {
        if (at >= 0) appended.splice(at, 1)
        else removed.add(k)
      }
    }
    if (size - removed.size + appended.length === 0) return null
    const candidates = narrowing.index.candidates(request, this.loaded.index)
    const rows: Array<readonly string[]> = []
    // The list's first copy of a removed row is the one taken out.
    const unseen = new Set(removed)
    for (const row of candidates) if (unseen.size === 0 || !unseen.delete(key(row))) rows.push(row)
    rows.push(...appended)
    if (rows.length === 0) return narrowing.noMatch
    if (narrowing.compiled !== null) return narrowing.compiled.decide(request, rows)[0]
    return narrowing.list.withList(rows as string[][], () => this.loaded.enforcer.enforceSync(...(request as [string, string, string, string])))
  }

  /**
   * The ids a holders list must decide besides root accounts, in
   * 'candidates' mode: the subjects of the rows the question may match and
   * every member reaching them where the matcher's ties ask. Null when
   * every account must be decided: another mode, an empty list, a model
   * that allows when no row matches (a deny-override effect), or a matcher
   * pinning a field to the requester.
   */
  possibleHolders(domain: string, obj: string, act: string): ReadonlySet<string> | null {
    const { index, narrowing } = this.loaded
    if (narrowing === null || narrowing.noMatch || narrowing.index.size === 0) return null
    return narrowing.index.possibleRequesters(domain, obj, act, index)
  }

  /** The question narrowedEnforce is answering (sub, dom, obj, act). */
  private readonly request: string[] = ['', '', '', '']

  /** Marks the latest change of the catalog or of a root sub-role (see `generation`). */
  private settingsStamp = 0

  /** The loaded policy's reverse look-ups, for holders and previews (read only). */
  get policy(): PolicyView {
    return this.loaded.index
  }

  /** The allow/deny rows of one subject (a sub-role code or a user id) in the given domains. */
  rulesOf(subject: string, domains: readonly string[]): IndexedRule[] {
    return this.loaded.index.rulesOf(subject, domains)
  }

  /**
   * Whether this row is held, when the change may skip Casbin's scans. The
   * reference model: the index keeps its rows one for one; a row it does
   * not keep (another effect or width) is looked up in the model's row
   * table, so every write on this model goes through modelRows and its
   * tables never miss a change. 'candidates' mode: the candidate index
   * holds the p rows in order; `g` rows go through modelRows as above (the
   * role manager does not read their order). undefined: Casbin's own.
   */
  private heldByIndex(ptype: 'p' | 'g', values: readonly string[]): boolean | undefined {
    const { enforcer, index, narrowing } = this.loaded
    if (ptype === 'p' && narrowing !== null) return narrowing.index.has(values)
    if (this.mode === 'enforce-cache') return undefined
    const held = ptype === 'p' ? index.hasPolicy(values) : index.hasGrouping(values)
    return held ?? hasRow(enforcer.getModel(), ptype, values)
  }

  /**
   * Adds a rule; an override that expires (`expiresAt`, epoch ms) is counted
   * until then, and one whose instant has already passed is not added at all.
   */
  async addRule(ptype: 'p' | 'g', values: readonly string[], expiresAt: number | null = null): Promise<void> {
    if (ptype === 'p' && expiresAt !== null && expiresAt <= this.now()) {
      await this.removeRule(ptype, values)
      return
    }
    await this.addRuleRow(ptype, values)
    if (ptype !== 'p') return
    const { expiries } = this.loaded
    if (expiresAt === null) {
      expiries.clear(values)
      return
    }
    expiries.set(values, expiresAt)
    this.expiryWatcher?.()
  }

  private async addRuleRow(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    const { enforcer, index, cache, narrowing } = this.loaded
    const held = this.heldByIndex(ptype, values)
    if (held === true) return
    if (held === false && ptype === 'p' && narrowing !== null) {
      narrowing.index.add(values)
      narrowing.list.stale()
    } else if (held === false) {
      const row = appendRow(enforcer.getModel(), ptype, values)
      if (ptype === 'g') await enforcer.buildIncrementalRoleLinks(PolicyOp.PolicyAdd, 'g', [row])
    } else if (ptype === 'p') {
      await enforcer.addNamedPolicy('p', ...values)
    } else {
      await enforcer.addNamedGroupingPolicy('g', ...values)
    }
    if (ptype === 'p') index.addPolicy(values)
    else index.addGrouping(values)
    cache?.clear()
  }

  async removeRule(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    const { enforcer, index, cache, expiries, narrowing } = this.loaded
    if (ptype === 'p' && expiries.size > 0) expiries.clear(values)
    const held = this.heldByIndex(ptype, values)
    if (held === false) return
    if (held === true && ptype === 'p' && narrowing !== null) {
      narrowing.index.remove(values)
      narrowing.list.stale()
    } else if (held === true) {
      removeRows(enforcer.getModel(), ptype, values)
      if (ptype === 'g') await enforcer.buildIncrementalRoleLinks(PolicyOp.PolicyRemove, 'g', [[...values]])
    } else if (ptype === 'p') {
      await enforcer.removeNamedPolicy('p', ...values)
    } else {
      await enforcer.removeNamedGroupingPolicy('g', ...values)
    }
    if (ptype === 'p') index.removePolicy(values)
    else index.removeGrouping(values)
    cache?.clear()
  }
}
