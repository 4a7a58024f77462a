import type { Adapter, Enforcer } from 'casbin'
import { homeDomain } from '../../domain/principals.js'
import type { DecisionIndex, RuleChange } from '../decisionIndex.js'
import type { AccountLookup, DecisionPath, PathLoader, Reached } from '../decisionPath.js'
import type { OverrideExpiries } from '../overrideExpiryQueue.js'
import { withRowsChanged } from '../overlay.js'
import { loadIndexed } from './indexPath.js'
import { DecisionCache } from './decisionCache.js'

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

  private readonly enforce = (subjectId: string, domain: string, obj: string, act: string): boolean => this.enforcer.enforceSync(subjectId, domain, obj, act)

  allows(subjectId: string, domain: string, obj: string, act: string): boolean {
    return this.cache.answer(subjectId, domain, obj, act, this.enforce)
  }

  allowsUncached(subjectId: string, domain: string, obj: string, act: string): boolean {
    return this.enforce(subjectId, domain, obj, act)
  }

  explain(subjectId: string, domain: string, obj: string, act: string): [boolean, readonly string[] | null] {
    const [allowed, rule] = this.enforcer.enforceExSync(subjectId, domain, obj, act)
    return [allowed, rule.length > 0 ? rule : null]
  }

  /** Asked synchronously with the rows changed, and put back before anything else runs. */
  allowsAfter(subjectId: string, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean {
    return withRowsChanged(this.enforcer.getModel(), changes, () => this.enforce(subjectId, domain, obj, act))
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
