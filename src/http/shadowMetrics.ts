import { Counter, type Registry } from 'prom-client'
import type { ShadowModelComparer } from '../decisionLog/shadow.js'

/**
 * The shadow model's counters, read from the comparer at scrape time (a
 * comparison pays no label look-up). Disagreements are labelled by pair,
 * which the catalog bounds: a pair outside it never disagrees.
 */
export function registerShadowMetrics(registry: Registry, shadow: ShadowModelComparer | null): void {
  new Counter({
    name: 'aps_shadow_comparisons_total',
    help: 'Gateway decisions also asked of the shadow model (SHADOW_MODEL_PATH, sampled by SHADOW_SAMPLE), after the answer was sent',
    registers: [registry],
    collect() {
      this.reset()
      this.inc(shadow?.compared ?? 0)
    },
  })
  new Counter({
    name: 'aps_shadow_disagreements_total',
    help: 'Compared decisions the shadow model answered otherwise than the live model, by pair',
    labelNames: ['obj', 'act'],
    registers: [registry],
    collect() {
      this.reset()
      for (const { obj, act, count } of shadow?.disagreements() ?? []) this.inc({ obj, act }, count)
    },
  })
}
