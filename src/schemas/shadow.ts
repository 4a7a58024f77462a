import { Type, type Static } from '@sinclair/typebox'
import { Act, Obj } from './common.js'

/** GET /v2/admin/model/shadow: the shadow model's comparisons since the start. */
export const ShadowSummaryData = Type.Object({
  enabled: Type.Boolean({ description: 'whether decisions are being asked of the shadow model now' }),
  reason: Type.Optional(Type.String({ description: 'when not enabled: why (none configured, refused at start, set aside)' })),
  model_id: Type.Union([Type.String({ pattern: '^[0-9a-f]{12}$' }), Type.Null()], { description: "the first 12 hex digits of the shadow model text's SHA-256" }),
  sample: Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], { description: 'the share of gateway decisions compared (SHADOW_SAMPLE)' }),
  since: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'when comparing started' }),
  compared: Type.Integer({ minimum: 0, description: 'decisions asked of the shadow model' }),
  disagreements: Type.Array(
    Type.Object({
      obj: Obj,
      act: Act,
      count: Type.Integer({ minimum: 1 }),
      decision_ids: Type.Array(Type.String(), { maxItems: 5, description: 'the first disagreeing decisions of the pair' }),
    }),
    { description: 'by pair, in the order pairs first disagreed' },
  ),
})
export type ShadowSummaryData = Static<typeof ShadowSummaryData>
