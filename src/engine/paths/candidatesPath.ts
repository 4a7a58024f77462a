import type { Adapter, Enforcer } from 'casbin'
import { homeDomain } from '../../domain/principals.js'
import { CandidateIndex } from '../candidateIndex.js'
import { CompiledModel, type RoleFunction } from '../compiledModel.js'
import { DecisionIndex, type RuleChange } from '../decisionIndex.js'
import type { AccountLookup, DecisionPath, DecisionPathName, PathLoader, Reached } from '../decisionPath.js'
import { LazyPolicyList } from '../lazyPolicyList.js'
import type { Alternative, MatcherReading } from '../matcherAnalysis.js'
import { loadEnforcer } from '../model.js'
import { indexRowsSoon } from '../modelRows.js'
import type { OverrideExpiries } from '../overrideExpiryQueue.js'
import { withRowsChanged } from '../overlay.js'
import { reasonOf, type ReasonCode } from '../explain.js'
import { DecisionCache, type KeptDecision } from './decisionCache.js'
import { addByRowTable, removeByRowTable } from './rowTableWrites.js'

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

/** What a candidates path keeps beside Casbin's enforcer, built by one load. */
interface CandidateRows {
  enforcer: Enforcer
  index: DecisionIndex
  expiries: OverrideExpiries
  candidates: CandidateIndex
  /** Casbin's p list, built from the candidate index when read after a write. */
  list: LazyPolicyList
}

/**
 * The rows of an edited model whose every matcher alternative ties the
 * policy's subject to the requester: the candidate index holds the p rows
 * in list order and the decision index only names grants (filed in the
 * background). A load is ready without the index's grants.
 */
async function loadCandidateRows(modelText: string, alternatives: readonly Alternative[], adapter: Adapter, expiries: OverrideExpiries): Promise<CandidateRows> {
  const enforcer = await loadEnforcer(modelText, adapter)
  const model = enforcer.getModel()
  const rows = model.model.get('p')?.get('p')?.policy ?? []
  let built: CandidateIndex | null = null
  // The index's p part is filed in the background, from the candidate index's rows once it exists (the list may be its own by then).
  const index = DecisionIndex.deferringPolicies(() => built?.ordered() ?? rows, model.model.get('g')?.get('g')?.policy ?? [])
  indexRowsSoon(model, ['g'])
  const candidates = new CandidateIndex(alternatives, rows)
  built = candidates
  return { enforcer, index, expiries, candidates, list: new LazyPolicyList(model, () => candidates.ordered()) }
}

/**
 * A model of the candidates family: a question gathers the rows it can
 * match (the requester's and those of every role it reaches, in list
 * order) and the model's matcher and effect run over those only, which
 * decides as over the whole list. Writes change the candidate index (p
 * rows keep their places, as the `priority` effect reads them) and the
 * row tables (g rows); Casbin's p list is built again when read.
 */
abstract class CandidatesPath implements DecisionPath {
  abstract readonly name: DecisionPathName
  abstract readonly how: string
  readonly why = 'the model differs from the one the decision index implements, so '
  readonly scansEveryRow = false
  readonly enforcer: Enforcer
  readonly index: DecisionIndex
  readonly expiries: OverrideExpiries
  protected readonly candidates: CandidateIndex
  protected readonly list: LazyPolicyList
  /** The question being answered (sub, dom, obj, act): read synchronously only, so one array serves every question. */
  protected readonly request: string[] = ['', '', '', '']

  constructor(
    rows: CandidateRows,
    /** What the effect answers when no row matches (Casbin over a list none of whose rows match). */
    private readonly noMatch: boolean,
  ) {
    this.enforcer = rows.enforcer
    this.index = rows.index
    this.expiries = rows.expiries
    this.candidates = rows.candidates
    this.list = rows.list
  }

  /** The row that decided the last question (see decidingRow()). */
  protected row: readonly string[] | null = null

  /** The model's matcher and effect over `rows` (not empty; the question in `request`): the answer, the row enforceEx names left in `row`. */
  protected abstract over(rows: ReadonlyArray<readonly string[]>): boolean

  /** Dropped on every write that changes a row; none when a decision costs less than a look-up. */
  protected clearCache(): void {}

  abstract decide(subjectId: string, domain: string, obj: string, act: string): ReasonCode

  decideUncached(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    return this.narrowed(subjectId, domain, obj, act)
  }

  decidingRow(): readonly string[] | null {
    return this.row
  }

  /** Casbin's enforceEx over the list as it stands: the answer, the row it names left in `row`. */
  protected casbin(subjectId: string, domain: string, obj: string, act: string): boolean {
    const [allowed, rule] = this.enforcer.enforceExSync(subjectId, domain, obj, act)
    this.row = rule.length > 0 ? rule : null
    return allowed
  }

  /**
   * The question's candidate rows, in the list's order, and the model over
   * them. Rows left out cannot match (their subject is neither the
   * requester nor a role it reaches where the matcher asks, or a pinned
   * field differs), so the answer is the whole list's.
   */
  protected narrowed(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    // An empty list is read by Casbin otherwise (the matcher over empty fields): asked of Casbin, at no cost.
    if (this.candidates.size === 0) return reasonOf(subjectId, this.casbin(subjectId, domain, obj, act), this.row)
    const request = this.request
    request[0] = subjectId
    request[1] = domain
    request[2] = obj
    request[3] = act
    const rows = this.candidates.candidates(request, this.index)
    if (rows.length === 0) {
      this.row = null
      return reasonOf(subjectId, this.noMatch, null)
    }
    return reasonOf(subjectId, this.over(rows), this.row)
  }

  /**
   * The question's candidate rows with the changes laid over them, as
   * withRowsChanged lays them over the whole list (in order: an add not
   * held is appended after every row, a remove takes the row out), then the
   * model over those rows only. Appended rows all go in: the matcher
   * decides which match. An empty list before or after the change is asked
   * of Casbin over the whole list (Casbin reads an empty list otherwise).
   */
  allowsAfter(subjectId: string, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    const whole = () => withRowsChanged(this.enforcer.getModel(), changes, () => this.enforcer.enforceSync(subjectId, domain, obj, act))
    // The index's count, not Casbin's list: reading the list after a write would build it again.
    const size = this.candidates.size
    if (size === 0) return whole()
    const key = (row: readonly string[]) => row.join('\u0000')
    const removed = new Set<string>()
    const appended: Array<readonly string[]> = []
    for (const { op, rule } of changes) {
      const k = key(rule)
      const at = appended.findIndex((row) => key(row) === k)
      const held = at >= 0 || (!removed.has(k) && this.candidates.has(rule))
      if (op === 'add' && !held) appended.push([...rule])
      else if (op === 'remove' && held) {
        if (at >= 0) appended.splice(at, 1)
        else removed.add(k)
      }
    }
    if (size - removed.size + appended.length === 0) return whole()
    const request = [subjectId, domain, obj, act]
    const candidates = this.candidates.candidates(request, this.index)
    const rows: Array<readonly string[]> = []
    // The list's first copy of a removed row is the one taken out.
    const unseen = new Set(removed)
    for (const row of candidates) if (unseen.size === 0 || !unseen.delete(key(row))) rows.push(row)
    rows.push(...appended)
    if (rows.length === 0) return this.noMatch
    const asked = this.request
    for (let i = 0; i < 4; i++) asked[i] = request[i] as string
    return this.over(rows)
  }

  /**
   * The subjects of the rows the question may match and every member
   * reaching them where the matcher's ties ask. Null (every account is
   * decided) for an empty list, a model that allows when no row matches (a
   * deny-override effect), or a matcher pinning a field to the requester.
   */
  possibleHolders(domain: string, obj: string, act: string): ReadonlySet<string> | null {
    if (this.noMatch || this.candidates.size === 0) return null
    return this.candidates.possibleRequesters(domain, obj, act, this.index)
  }

  /** Every user linked to the role in any domain (no row of the role reaches anyone else), each decided in its home domain: the matcher says where a row counts. */
  roleReach(accounts: AccountLookup, role: string): Reached[] {
    const members = new Set([role])
    for (const d of [...this.index.linkDomains()]) this.index.membersReaching([role], d, members)
    const reached: Reached[] = []
    for (const id of members) {
      const account = accounts.peek(id)
      if (account !== undefined && account.id === id) reached.push({ account, domain: homeDomain(account) })
    }
    return reached
  }

  async add(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    if (ptype === 'g') {
      if (await addByRowTable(this.enforcer, this.index, ptype, values)) this.clearCache()
      return
    }
    if (this.candidates.has(values)) return
    this.candidates.add(values)
    this.list.stale()
    this.index.addPolicy(values)
    this.clearCache()
  }

  async remove(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    if (ptype === 'g') {
      if (await removeByRowTable(this.enforcer, this.index, ptype, values)) this.clearCache()
      return
    }
    if (!this.candidates.has(values)) return
    this.candidates.remove(values)
    this.list.stale()
    this.index.removePolicy(values)
    this.clearCache()
  }
}

/**
 * 'candidates': the model's matcher and effect compiled once, run over the
 * candidate rows. No decision cache: a compiled decision costs less than
 * building and hashing the cache's key.
 */
export class CompiledCandidatesPath extends CandidatesPath {
  readonly name = 'candidates'
  readonly how = "Casbin's matcher and effect over the rows a question can match (a candidate index on the fields the matcher pins)"

  private constructor(
    rows: CandidateRows,
    private readonly compiled: CompiledModel,
  ) {
    super(rows, compiled.noMatch())
  }

  static loader(modelText: string, matcher: MatcherReading, alternatives: readonly Alternative[]): PathLoader {
    return {
      name: 'candidates',
      async load(adapter: Adapter, expiries: OverrideExpiries): Promise<DecisionPath> {
        const rows = await loadCandidateRows(modelText, alternatives, adapter, expiries)
        // choosePath compiled this matcher already: only the role functions differ, so this never gives null.
        const model = CompiledModel.compile(rows.enforcer.getModel(), matcher, roleFunctions(rows.enforcer, rows.index))
        if (model === null) throw new Error('the matcher no longer compiles')
        return new CompiledCandidatesPath(rows, model)
      },
    }
  }

  decide(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    return this.narrowed(subjectId, domain, obj, act)
  }

  protected over(rows: ReadonlyArray<readonly string[]>): boolean {
    const allowed = this.compiled.decide(this.request, rows)
    this.row = this.compiled.named
    return allowed
  }
}

/**
 * 'candidates-enforce': a matcher the compiler does not read (see
 * docs/model-family.md): the candidate rows are swapped in for Casbin's
 * list for one synchronous enforce() and put back, with a decision cache
 * every write clears.
 */
export class EnforcedCandidatesPath extends CandidatesPath {
  readonly name = 'candidates-enforce'
  readonly how = "Casbin's enforce() over the rows a question can match (a candidate index on the fields the matcher pins), with a cache"
  readonly cache = new DecisionCache()

  static loader(modelText: string, alternatives: readonly Alternative[], noMatch: boolean): PathLoader {
    return {
      name: 'candidates-enforce',
      async load(adapter: Adapter, expiries: OverrideExpiries): Promise<DecisionPath> {
        return new EnforcedCandidatesPath(await loadCandidateRows(modelText, alternatives, adapter, expiries), noMatch)
      },
    }
  }

  private readonly uncached = (subjectId: string, domain: string, obj: string, act: string): KeptDecision => {
    const code = this.narrowed(subjectId, domain, obj, act)
    return { code, row: this.row }
  }

  decide(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    const kept = this.cache.answer(subjectId, domain, obj, act, this.uncached)
    this.row = kept.row
    return kept.code
  }

  protected override clearCache(): void {
    this.cache.clear()
  }

  protected over(rows: ReadonlyArray<readonly string[]>): boolean {
    const [s, d, o, a] = this.request as [string, string, string, string]
    return this.list.withList([...rows] as string[][], () => this.casbin(s, d, o, a))
  }
}
