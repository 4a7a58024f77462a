/** One pair's disagreements: how many, and the first decision ids. */
export interface PairDisagreements {
  obj: string
  act: string
  count: number
  decision_ids: string[]
}

/** The summary's shape (its schema: src/schemas/shadow.ts). */
export interface ShadowSummary {
  enabled: boolean
  reason?: string
  model_id: string | null
  sample: number | null
  since: string | null
  compared: number
  disagreements: PairDisagreements[]
}

/** What the summary reads of the shadow comparer (src/decisionLog/shadow.ts). */
export interface ShadowView {
  readonly modelId: string
  readonly sample: number
  /** Epoch ms. */
  readonly since: number
  readonly compared: number
  /** Null while the shadow follows the live policy. */
  readonly setAsideFor: string | null
  disagreements(): PairDisagreements[]
}

/** The shadow model as this process runs it: the comparer, or why there is none. */
export interface ShadowState {
  shadow: ShadowView | null
  /** Why the configured shadow model was refused at start; null when none is configured or it was admitted. */
  refusal: string | null
}

/**
 * The shadow model's summary: decisions compared, disagreements by pair
 * with their first decision ids, since when; or why nothing is compared.
 * Counts are this process's (each replica compares the decisions it answers).
 */
export function shadowSummary({ shadow, refusal }: ShadowState): ShadowSummary {
  if (shadow === null) {
    const reason = refusal === null ? 'no shadow model is configured (SHADOW_MODEL_PATH)' : `the shadow model was refused at start: ${refusal}`
    return { enabled: false, reason, model_id: null, sample: null, since: null, compared: 0, disagreements: [] }
  }
  const summary: ShadowSummary = {
    enabled: shadow.setAsideFor === null,
    model_id: shadow.modelId,
    sample: shadow.sample,
    since: new Date(shadow.since).toISOString(),
    compared: shadow.compared,
    disagreements: shadow.disagreements(),
  }
  return shadow.setAsideFor === null ? summary : { ...summary, reason: shadow.setAsideFor }
}
