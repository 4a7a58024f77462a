import { scopeOf, type CatalogEntry } from '../domain/permissions.js'
import { GLOBAL_DOMAIN, type PrincipalType } from '../domain/principals.js'
import type { Queryable } from '../storage/db.js'
import { RecordedAdapter, RulesAdapter, StorageAdapter, type PolicyRecord, type PolicyRules } from './adapter.js'
import { nextStamp, type DecisionIndex, type IndexedRule, type RuleChange } from './decisionIndex.js'
import { choosePath, type AccountLookup, type DecisionPath, type DecisionPathName, type PathLoader, type Reached } from './decisionPath.js'
import { REASON, allows, explainedKind, namesARow, type Explanation, type ReasonCode } from './explain.js'
import { OverrideExpiries } from './overrideExpiryQueue.js'

export { isReferenceModel } from './decisionPath.js'
export { DECISION_CACHE_LIMIT } from './paths/decisionCache.js'

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

/** A catalog entry as given to the engine: without a scope, the code's (a policy file's catalog, a change from an older replica). */
export type CatalogInput = Omit<CatalogEntry, 'scope'> & Partial<Pick<CatalogEntry, 'scope'>>

/** Everything the engine needs from the store besides the policy rows. */
export interface EngineState {
  rootRoles: Iterable<string>
  catalog: Iterable<CatalogInput>
}

/** What holders and previews read of the loaded policy's rows. */
export type PolicyView = Pick<DecisionIndex, 'allowersOf' | 'allows' | 'hasPolicy' | 'linkDomains' | 'membersReaching'>

/** obj → act → entry: looked up on every decision, so no key string is built per question. */
type Catalog = Map<string, Map<string, CatalogEntry>>

/** settledOutsideModel's answer when the model must decide. */
const NOT_SETTLED = -1

/**
 * What every decision applies in front of the model (which sub-roles are
 * root, which pairs are active in the catalog, the tenant rule), and the
 * loaded policy's decision path, chosen once when the engine is made
 * (decisionPath.ts): the path decides every other answer. Changes are
 * applied in memory after their commit.
 */
export class PermissionEngine {
  /** Told when the soonest expiry may have moved (a change or a reload). */
  private expiryWatcher: (() => void) | null = null

  private constructor(
    private path: DecisionPath,
    private readonly loader: PathLoader,
    private rootRoles: Set<string>,
    private catalog: Catalog,
    private readonly now: () => number,
  ) {}

  /**
   * `now` is the clock expiries are read against (a test's clock, or the
   * system's). `record`, when given, keeps the rows read for a second model
   * (fromRecord).
   */
  static async load(db: Queryable, modelText: string, state: EngineState, now: () => number = Date.now, record?: PolicyRecord): Promise<PermissionEngine> {
    const loader = await choosePath(modelText)
    const path = await PermissionEngine.loadPath(loader, db, now(), record)
    return new PermissionEngine(path, loader, new Set(state.rootRoles), PermissionEngine.catalogMap(state.catalog), now)
  }

  /** An engine of another model over the rows a load recorded (the shadow model beside the live one), expiries included. */
  static async fromRecord(modelText: string, record: PolicyRecord, state: EngineState, now: () => number = Date.now): Promise<PermissionEngine> {
    const loader = await choosePath(modelText)
    const expiries = new OverrideExpiries()
    const path = await loader.load(new RecordedAdapter(record, (values, at) => expiries.set(values, at)), expiries)
    return new PermissionEngine(path, loader, new Set(state.rootRoles), PermissionEngine.catalogMap(state.catalog), now)
  }

  /** An engine over rules already in memory (a policy file, a decisions file's policy): the decisions the service would take on them. */
  static async fromRules(modelText: string, rules: PolicyRules, state: EngineState = { rootRoles: [], catalog: [] }): Promise<PermissionEngine> {
    const loader = await choosePath(modelText)
    const path = await loader.load(new RulesAdapter(rules), new OverrideExpiries())
    return new PermissionEngine(path, loader, new Set(state.rootRoles), PermissionEngine.catalogMap(state.catalog), Date.now)
  }

  private static loadPath(loader: PathLoader, db: Queryable, now: number, record?: PolicyRecord): Promise<DecisionPath> {
    const expiries = new OverrideExpiries()
    const adapter = new StorageAdapter(db, { now, onExpiring: (values, at) => expiries.set(values, at), ...(record !== undefined ? { record } : {}) })
    return loader.load(adapter, expiries)
  }

  private static catalogMap(entries: Iterable<CatalogInput>): Catalog {
    const catalog: Catalog = new Map()
    for (const entry of entries) {
      let acts = catalog.get(entry.obj)
      if (acts === undefined) {
        acts = new Map()
        catalog.set(entry.obj, acts)
      }
      acts.set(entry.act, { ...entry, scope: entry.scope ?? scopeOf(entry) })
    }
    return catalog
  }

  /** The decision path the model got (logs, `model check`, tests); chosen once, when the engine was made. */
  get mode(): DecisionPathName {
    return this.path.name
  }

  /** How decisions are taken, and why the model gets that path, in words. */
  get pathWords(): { how: string; why: string; scansEveryRow: boolean } {
    return { how: this.path.how, why: this.path.why, scansEveryRow: this.path.scansEveryRow }
  }

  /**
   * Loads the policy again on the same path, off to the side, and swaps it
   * in at once: no check sees a partial policy. `record` keeps the rows read
   * (see load).
   */
  async reload(db: Queryable, state: EngineState, record?: PolicyRecord): Promise<void> {
    this.path = await PermissionEngine.loadPath(this.loader, db, this.now(), record)
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
    return this.path.expiries.next()
  }

  /** When this user's override of the pair in `domain` stops counting; null when it does not expire (or is not there). */
  overrideExpiresAt(userId: string, domain: string, obj: string, act: string): number | null {
    return this.path.expiries.at(userId, domain, obj, act)
  }

  /** Takes every override whose instant has passed out of the decisions; returns their rows. */
  async expireDue(): Promise<Array<readonly string[]>> {
    const due = this.path.expiries.takeDue(this.now())
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

  replaceCatalog(entries: Iterable<CatalogInput>): void {
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
    return Math.max(this.settingsStamp, this.path.index.stamp)
  }

  /** Casbin alone (a linear scan of the policy): for the differential test and tools, never on a request path. */
  enforce(subjectId: string, domain: string, obj: string, act: string): boolean {
    return this.path.enforcer.enforceSync(subjectId, domain, obj, act)
  }

  /** Casbin alone with the row it names (enforceEx): for tests and tools, never on a request path. */
  enforceEx(subjectId: string, domain: string, obj: string, act: string): [boolean, string[]] {
    return this.path.enforcer.enforceExSync(subjectId, domain, obj, act)
  }

  /** The model's answer as a decision pays for it when nothing is cached (right after a write). No tenant, root or catalog rule. */
  uncachedModelAllows(subjectId: string, domain: string, obj: string, act: string): boolean {
    return allows(this.path.decideUncached(subjectId, domain, obj, act))
  }

  /**
   * The loaded policy's rows (p rows with the overrides, g rows), read only.
   * Read them before the next write: on a candidates path the p list a
   * write leaves behind is built again on the next read, and the one read
   * before may be the candidate index's own (holes where rows were removed).
   */
  get loadedRules(): { readonly p: readonly (readonly string[])[]; readonly g: readonly (readonly string[])[] } {
    const model = this.path.enforcer.getModel().model
    return { p: model.get('p')?.get('p')?.policy ?? [], g: model.get('g')?.get('g')?.policy ?? [] }
  }

  /**
   * What a user holding only `subRole`, at home in `domain`, would be allowed
   * there: the sub-role asked as the subject, under decide()'s rules for a
   * user at home there (a merchant user outside `global`).
   */
  subRoleAllows(subRole: string, domain: string, obj: string, act: string): boolean {
    const merchant = domain !== GLOBAL_DOMAIN
    const member: Subject = { id: subRole, principal_type: merchant ? 'merchant' : 'system_owner', merchant_id: merchant ? domain : null, sub_role_code: subRole }
    return this.decide(member, domain, obj, act)
  }

  /** The one decision every path uses: route guard, check endpoints, effective sets. */
  decide(subject: Subject, domain: string, obj: string, act: string): boolean {
    return allows(this.decision(subject, domain, obj, act))
  }

  /**
   * decide() with its reason, from the same evaluation: a code (REASON; it
   * allows exactly when `allows(code)`), the deciding row read right after
   * with decidingRule(). A small integer, so the hot path allocates nothing.
   */
  decision(subject: Subject, domain: string, obj: string, act: string): ReasonCode {
    const settled = this.settledOutsideModel(subject, domain, obj, act)
    this.settled = settled !== NOT_SETTLED
    return settled === NOT_SETTLED ? this.path.decide(subject.id, domain, obj, act) : settled
  }

  /** Whether the last decision() was settled before the model (no row decided it). */
  private settled = false

  /**
   * The Casbin row (sub, dom, obj, act, eft) that decided the last
   * decision(), as text; null when a rule outside the model settled it or
   * no row did. Read it before the next decision.
   */
  decidingRule(): string[] | null {
    if (this.settled) return null
    const row = this.path.decidingRow()
    return row === null ? null : [...row]
  }

  /**
   * The rules every decision applies before the model (a deactivated
   * account holds nothing, only active catalog pairs, a merchant user only
   * in its merchant and never a `platform` pair, a root sub-role everything
   * else): the reason when one of them settles the question, else NOT_SETTLED.
   */
  private settledOutsideModel(subject: Subject, domain: string, obj: string, act: string): ReasonCode | typeof NOT_SETTLED {
    if (subject.status === 'deactivated') return REASON.deactivated
    const entry = this.catalog.get(obj)?.get(act)
    if (entry?.is_active !== true) return REASON.not_in_catalog
    if (subject.principal_type === 'merchant') {
      if (subject.merchant_id !== domain) return REASON.outside_home_domain
      // Whatever the rows say (a `global` grant to a sub-role code merchants use too): the routes refuse merchant users.
      // No row decided, as when nothing holds the pair.
      if (entry.scope === 'platform') return REASON.none
    }
    if (this.rootRoles.has(subject.sub_role_code)) return REASON.root
    return NOT_SETTLED
  }

  /** decide() and why, read from that one decision: its reason and the row that decided. Off the hot path: only `explain=true` asks. */
  explain(subject: Subject, domain: string, obj: string, act: string): Explanation {
    const code = this.decision(subject, domain, obj, act)
    const rule = namesARow(code) ? this.decidingRule() : null
    const kind = explainedKind(code)
    return { allowed: allows(code), reason: rule === null ? { kind } : { kind, rule } }
  }

  /**
   * What decide() would answer with the p rows of `changes` added or
   * removed (a preview). The live policy, every other answer and the
   * decision cache stay as they are.
   */
  decideAfter(subject: Subject, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    const settled = this.settledOutsideModel(subject, domain, obj, act)
    return settled === NOT_SETTLED ? this.path.allowsAfter(subject.id, domain, obj, act, changes) : allows(settled)
  }

  /** The ids a holders list must decide besides root accounts; null when every account must be decided. */
  possibleHolders(domain: string, obj: string, act: string): ReadonlySet<string> | null {
    return this.path.possibleHolders(domain, obj, act)
  }

  /** The users a change of `role`'s row in `domain` may reach, each with the domain it is decided in. */
  roleReach(accounts: AccountLookup, role: string, domain: string): Reached[] {
    return this.path.roleReach(accounts, role, domain)
  }

  /** Marks the latest change of the catalog or of a root sub-role (see `generation`). */
  private settingsStamp = 0

  /** The loaded policy's reverse look-ups, for holders and previews (read only). */
  get policy(): PolicyView {
    return this.path.index
  }

  /** The allow/deny rows of one subject (a sub-role code or a user id) in the given domains. */
  rulesOf(subject: string, domains: readonly string[]): IndexedRule[] {
    return this.path.index.rulesOf(subject, domains)
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
    await this.path.add(ptype, values)
    if (ptype !== 'p') return
    const { expiries } = this.path
    if (expiresAt === null) {
      expiries.clear(values)
      return
    }
    expiries.set(values, expiresAt)
    this.expiryWatcher?.()
  }

  async removeRule(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    const { path } = this
    if (ptype === 'p' && path.expiries.size > 0) path.expiries.clear(values)
    await path.remove(ptype, values)
  }
}
