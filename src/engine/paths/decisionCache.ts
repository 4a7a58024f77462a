import type { ReasonCode } from '../explain.js'

/** Decisions kept before the cache starts again (a key string and a small record each): callers choose the questions, so it is bounded. */
export const DECISION_CACHE_LIMIT = 100_000

/** A decision kept: its reason code and the row that decided it. */
export interface KeptDecision {
  code: ReasonCode
  row: readonly string[] | null
}

/**
 * The answers of a path whose decision costs more than building and hashing
 * a key of the question: Casbin's enforce(). Every write clears it.
 */
export class DecisionCache {
  private readonly answers = new Map<string, KeptDecision>()

  get size(): number {
    return this.answers.size
  }

  /** The kept decision, or `work()`'s, kept. */
  answer(subjectId: string, domain: string, obj: string, act: string, work: (subjectId: string, domain: string, obj: string, act: string) => KeptDecision): KeptDecision {
    const key = `${subjectId}\u0000${domain}\u0000${obj}\u0000${act}`
    let answer = this.answers.get(key)
    if (answer === undefined) {
      answer = work(subjectId, domain, obj, act)
      // Callers choose the domain they ask about: the cache must not grow without bound.
      if (this.answers.size >= DECISION_CACHE_LIMIT) this.answers.clear()
      this.answers.set(key, answer)
    }
    return answer
  }

  clear(): void {
    this.answers.clear()
  }
}
