import { Type } from '@sinclair/typebox'
import { Act, Domain, Obj, ReadQuery, UserId } from './common.js'

/** Decision ids as the gateway routes give them: a request's id, with `.<i>` for a check-batch's items. */
const DecisionId = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_.:-]+$', examples: ['01JDQ7Z6R3M4K5N6P7Q8R9S0T1.2'] })

/** A page of decisions is bounded: each is a whole event. */
export const DECISIONS_MAX_LIMIT = 200

export const DecisionsQuery = ReadQuery({
  user_id: Type.Optional(UserId),
  allowed: Type.Optional(Type.Boolean()),
  obj: Type.Optional(Obj),
  act: Type.Optional(Act),
  domain: Type.Optional(Domain),
  decision_id: Type.Optional(DecisionId),
  from: Type.Optional(Type.String({ format: 'date-time', maxLength: 40, description: 'Decisions at or after this instant' })),
  to: Type.Optional(Type.String({ format: 'date-time', maxLength: 40, description: 'Decisions before this instant' })),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 400, pattern: '^[A-Za-z0-9_-]+$', description: "The previous page's `next_cursor`: the page after it, with the same filters" }),
  ),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: DECISIONS_MAX_LIMIT, description: 'Decisions per page (default 50)' })),
})

const Reason = Type.Object({ kind: Type.String(), rule: Type.Optional(Type.Array(Type.String())) })

/** One logged decision, as the decision log wrote it. */
export const DecisionItem = Type.Object({
  decision_id: Type.String(),
  time: Type.String({ description: 'RFC 3339 with microseconds' }),
  source: Type.String(),
  subject: Type.Object({
    user_id: Type.String(),
    principal_type: Type.String(),
    merchant_id: Type.Union([Type.String(), Type.Null()]),
    sub_role_code: Type.Union([Type.String(), Type.Null()]),
  }),
  caller_id: Type.Optional(Type.String()),
  domain: Type.String(),
  obj: Type.String(),
  act: Type.String(),
  allowed: Type.Boolean(),
  reason: Reason,
  policy_revision: Type.Integer(),
  model_id: Type.String(),
  replica: Type.String(),
  request_id: Type.String(),
  client_ip: Type.String(),
  method: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  shadow: Type.Optional(Type.Object({ allowed: Type.Boolean(), reason: Reason })),
})

export const DecisionsPage = Type.Object({
  items: Type.Array(DecisionItem),
  next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last' }),
})
