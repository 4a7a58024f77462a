import type { Adapter, Enforcer } from 'casbin'
import { GLOBAL_DOMAIN } from '../../domain/principals.js'
import { DecisionIndex, type RuleChange } from '../decisionIndex.js'
import type { AccountLookup, DecisionPath, PathLoader, Reached } from '../decisionPath.js'
import type { ReasonCode } from '../explain.js'
import { loadEnforcer } from '../model.js'
import { indexRowsSoon } from '../modelRows.js'
import type { OverrideExpiries } from '../overrideExpiryQueue.js'
import { addByRowTable, removeByRowTable } from './rowTableWrites.js'

/** Casbin's enforcer over the adapter's rows and the decision index of every row, built now. */
export async function loadIndexed(modelText: string, adapter: Adapter): Promise<{ enforcer: Enforcer; index: DecisionIndex }> {
  const enforcer = await loadEnforcer(modelText, adapter)
  const { model } = enforcer.getModel()
  return { enforcer, index: DecisionIndex.build(model.get('p')?.get('p')?.policy ?? [], model.get('g')?.get('g')?.policy ?? []) }
}

/**
 * The shipped model: the decision index answers with hash look-ups, written
 * for model.conf, and names the row that decided. No cache: a decision
 * costs less than a look-up in one. Writes go through the index and the row
 * tables (rowTableWrites.ts).
 */
export class IndexPath implements DecisionPath {
  readonly name = 'index'
  readonly how = 'the decision index'
  readonly why = ''
  readonly scansEveryRow = false

  private constructor(
    readonly enforcer: Enforcer,
    readonly index: DecisionIndex,
    readonly expiries: OverrideExpiries,
  ) {}

  static loader(modelText: string): PathLoader {
    return {
      name: 'index',
      async load(adapter: Adapter, expiries: OverrideExpiries): Promise<DecisionPath> {
        const { enforcer, index } = await loadIndexed(modelText, adapter)
        // Built in the background once loaded, so neither the load nor (most likely) the first write after it waits for them.
        indexRowsSoon(enforcer.getModel())
        return new IndexPath(enforcer, index, expiries)
      },
    }
  }

  decide(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    return this.index.reason(subjectId, domain, obj, act)
  }

  decideUncached(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    return this.index.reason(subjectId, domain, obj, act)
  }

  decidingRow(): readonly string[] | null {
    return this.index.decidingRow()
  }

  allowsAfter(subjectId: string, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    return this.index.allowedAfter(subjectId, domain, obj, act, changes)
  }

  /** The subjects with an allow row of the pair in the domain or in `global`, and every member reaching them by links in either. */
  possibleHolders(domain: string, obj: string, act: string): ReadonlySet<string> {
    const allowers = this.index.allowersOf(obj, act, domain)
    const reaching = this.index.membersReaching(allowers, domain, new Set())
    return domain === GLOBAL_DOMAIN ? reaching : this.index.membersReaching(allowers, GLOBAL_DOMAIN, reaching)
  }

  /**
   * Those reaching the role by links in `domain`, decided there; for a
   * `global` row, those reaching it in any domain (merchant users in their
   * own merchant, system-owner users in `global`), each decided in the
   * domain of its link.
   */
  roleReach(accounts: AccountLookup, role: string, domain: string): Reached[] {
    const reached: Reached[] = []
    const domains = domain === GLOBAL_DOMAIN ? [...this.index.linkDomains()] : [domain]
    for (const d of domains) {
      for (const id of this.index.membersReaching([role], d, new Set())) {
        const account = accounts.peek(id)
        if (account !== undefined) reached.push({ account, domain: d })
      }
    }
    return reached
  }

  async add(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    await addByRowTable(this.enforcer, this.index, ptype, values)
  }

  async remove(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    await removeByRowTable(this.enforcer, this.index, ptype, values)
  }
}
