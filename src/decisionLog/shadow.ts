import { pairKey, type PermissionEngine } from '../engine/engine.js'
import { namesARow } from '../engine/explain.js'
import { REASON_NAMES, allows } from '../engine/explain.js'
import type { ShadowEngine } from '../engine/shadowEngine.js'
import type { DecisionQuestion, DecisionReason, ShadowComparer } from './event.js'

/** Decision ids kept per disagreeing pair: enough to look a few up, bounded whatever the traffic. */
export const IDS_PER_PAIR = 5
/** Warn lines per second about disagreements; the rest are counted and the next line says how many. */
const WARNINGS_PER_SECOND = 10

export interface ShadowLogger {
  warn(obj: object, msg?: string): void
}

/** One pair's disagreements so far. */
export interface PairDisagreements {
  obj: string
  act: string
  count: number
  /** The first decision ids of the pair's disagreements, at most IDS_PER_PAIR. */
  decision_ids: string[]
}

export interface ShadowComparerOptions {
  /** The share of decisions compared, 0 to 1 (SHADOW_SAMPLE). */
  sample: number
  log?: ShadowLogger
  now?: () => number
  /** Draws the sample (tests pass their own). */
  random?: () => number
}

/**
 * The shadow model's side of gateway decisions: each (or the sample's share)
 * asked again of the shadow engine, with the same preconditions (catalog,
 * tenant, root, a deactivated account) as the live decision, after the
 * answer was sent. What it keeps is bounded: a count per pair, and pairs
 * come from the catalog (a pair outside it is settled before either model,
 * so both deny).
 */
export class ShadowModelComparer implements ShadowComparer {
  readonly since: number
  readonly sample: number
  private comparedCount = 0
  private readonly byPair = new Map<string, PairDisagreements>()
  private readonly now: () => number
  private readonly random: () => number
  private warnWindow = 0
  private warnedInWindow = 0
  private unwarned = 0

  constructor(
    private readonly shadow: ShadowEngine,
    private readonly options: ShadowComparerOptions,
  ) {
    this.now = options.now ?? Date.now
    this.random = options.random ?? Math.random
    this.sample = options.sample
    this.since = this.now()
  }

  /** The shadow's engine (tests, tools); null while it is set aside. */
  get engine(): PermissionEngine | null {
    return this.shadow.engine
  }

  get modelId(): string {
    return this.shadow.modelId
  }

  /** Null while the shadow follows the live policy, else why it stopped (it is built again at the next full reload). */
  get setAsideFor(): string | null {
    return this.shadow.setAsideFor
  }

  /** Decisions asked of the shadow so far. */
  get compared(): number {
    return this.comparedCount
  }

  /** Disagreements so far, by pair, in the order pairs first disagreed. */
  disagreements(): PairDisagreements[] {
    return [...this.byPair.values()].map((pair) => ({ ...pair, decision_ids: [...pair.decision_ids] }))
  }

  compare(question: DecisionQuestion, decisionId?: string): { allowed: boolean; reason: DecisionReason } | null {
    const engine = this.shadow.engine
    if (engine === null) return null
    if (this.sample < 1 && this.random() >= this.sample) return null
    this.comparedCount++
    const { account, domain, obj, act } = question
    const code = engine.decision(account, domain, obj, act)
    const allowed = allows(code)
    if (allowed === question.allowed) return null
    // Read right after the decision, as the row belongs to it.
    const rule = namesARow(code) ? engine.decidingRule() : null
    const reason: DecisionReason = rule === null ? { kind: REASON_NAMES[code] } : { kind: REASON_NAMES[code], rule }
    this.count(obj, act, decisionId)
    this.warn(question, decisionId, allowed, reason)
    return { allowed, reason }
  }

  private count(obj: string, act: string, decisionId: string | undefined): void {
    const key = pairKey(obj, act)
    let pair = this.byPair.get(key)
    if (pair === undefined) {
      pair = { obj, act, count: 0, decision_ids: [] }
      this.byPair.set(key, pair)
    }
    pair.count++
    if (decisionId !== undefined && pair.decision_ids.length < IDS_PER_PAIR) pair.decision_ids.push(decisionId)
  }

  private warn(question: DecisionQuestion, decisionId: string | undefined, allowed: boolean, reason: DecisionReason): void {
    const log = this.options.log
    if (log === undefined) return
    const now = this.now()
    if (now - this.warnWindow >= 1000) {
      this.warnWindow = now
      this.warnedInWindow = 0
    }
    if (this.warnedInWindow >= WARNINGS_PER_SECOND) {
      this.unwarned++
      return
    }
    this.warnedInWindow++
    const { account, domain, obj, act } = question
    const fields = {
      decision_id: decisionId,
      user_id: account.id,
      domain,
      obj,
      act,
      allowed: question.allowed,
      shadow: { allowed, reason },
      shadow_model_id: this.shadow.modelId,
      ...(this.unwarned > 0 ? { disagreements_not_logged: this.unwarned } : {}),
    }
    this.unwarned = 0
    log.warn(fields, `the shadow model disagrees: ${obj}:${act} in ${domain} is ${question.allowed ? 'allowed' : 'denied'}, the shadow model would ${allowed ? 'allow' : 'deny'} it (${reason.kind})`)
  }
}
