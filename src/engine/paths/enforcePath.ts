import type { Adapter, Enforcer } from 'casbin'
import { homeDomain } from '../../domain/principals.js'
import type { DecisionIndex, RuleChange } from '../decisionIndex.js'
import type { AccountLookup, DecisionPath, PathLoader, Reached } from '../decisionPath.js'
import type { OverrideExpiries } from '../overrideExpiryQueue.js'
import { withRowsChanged } from '../overlay.js'
import { reasonOf, type ReasonCode } from '../explain.js'
import { loadIndexed } from './indexPath.js'
import { DecisionCache, type KeptDecision } from './decisionCache.js'

/**
 * Any model outside the family the candidate index serves (an alternative
 * with no subject tie, a request attribute beyond the four the API sends,
 * eval()): Casbin's enforce() over every row, with a cache every write
 * clears, and Casbin's own methods for writes. Its cost grows with the policy.
 */
export class EnforcePath implements DecisionPath {
  readonly name = 'enforce-cache'
  readonly how = 'enforce() with a cache (a scan of every p rule per uncached decision; every write clears the cache)'
  readonly why = "the matcher does not tie the policy's subject to the requester in every alternative, so "
  readonly scansEveryRow = true
  readonly cache = new DecisionCache()

  private constructor(
    readonly enforcer: Enforcer,
    readonly index: DecisionIndex,
    readonly expiries: OverrideExpiries,
  ) {}

  static loader(modelText: string): PathLoader {
    return {
      name: 'enforce-cache',
      async load(adapter: Adapter, expiries: OverrideExpiries): Promise<DecisionPath> {
        const { enforcer, index } = await loadIndexed(modelText, adapter)
        return new EnforcePath(enforcer, index, expiries)
      },
    }
  }

  /** Casbin's enforceEx: the answer and the row it names, in one evaluation. */
  private readonly enforce = (subjectId: string, domain: string, obj: string, act: string): KeptDecision => {
    const [allowed, rule] = this.enforcer.enforceExSync(subjectId, domain, obj, act)
    const row = rule.length > 0 ? rule : null
    return { code: reasonOf(subjectId, allowed, row), row }
  }

  /** The row of the last decision. */
  private row: readonly string[] | null = null

  decide(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    const kept = this.cache.answer(subjectId, domain, obj, act, this.enforce)
    this.row = kept.row
    return kept.code
  }

  decideUncached(subjectId: string, domain: string, obj: string, act: string): ReasonCode {
    const kept = this.enforce(subjectId, domain, obj, act)
    this.row = kept.row
    return kept.code
  }

  decidingRow(): readonly string[] | null {
    return this.row
  }

  /** Asked synchronously with the rows changed, and put back before anything else runs. */
  allowsAfter(subjectId: string, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    return withRowsChanged(this.enforcer.getModel(), changes, () => this.enforcer.enforceSync(subjectId, domain, obj, act))
  }

  /** Any account may hold a pair the rows do not show: every one is decided. */
  possibleHolders(): null {
    return null
  }

  /** Any user, in its home domain: the matcher, not the links, says where a row counts. */
  roleReach(accounts: AccountLookup): Reached[] {
    const reached: Reached[] = []
    for (const account of accounts.all()) reached.push({ account, domain: homeDomain(account) })
    return reached
  }

  async add(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    if (ptype === 'p') {
      await this.enforcer.addNamedPolicy('p', ...values)
      this.index.addPolicy(values)
    } else {
      await this.enforcer.addNamedGroupingPolicy('g', ...values)
      this.index.addGrouping(values)
    }
    this.cache.clear()
  }

  async remove(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    if (ptype === 'p') {
      await this.enforcer.removeNamedPolicy('p', ...values)
      this.index.removePolicy(values)
    } else {
      await this.enforcer.removeNamedGroupingPolicy('g', ...values)
      this.index.removeGrouping(values)
    }
    this.cache.clear()
  }
}
