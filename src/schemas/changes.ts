import { Type } from '@sinclair/typebox'
import { CHANGE_EVENTS, CHANGE_KINDS } from '../domain/changeItems.js'
import { Domain, ReadQuery } from './common.js'

/** `after` is read as text: anything but a revision of this store is refused with its own code (`122`), not `100`. */
const After = Type.Optional(Type.String({ maxLength: 40, description: 'list the changes after this revision (default 0): decimal digits, at most the current revision' }))

export const ChangesQuery = ReadQuery({
  after: After,
  domain: Type.Optional(Domain),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'items per page (default 100); the last revision is always finished' })),
})

export const ChangeStreamQuery = ReadQuery({ after: After, domain: Type.Optional(Domain) })

export const ChangeItem = Type.Object({
  revision: Type.Integer(),
  index: Type.Integer({ description: "the change's place within its revision" }),
  time: Type.String({ format: 'date-time' }),
  kind: Type.Union(CHANGE_KINDS.map((k) => Type.Literal(k))),
  domain: Type.String(),
  sub_role: Type.Optional(Type.String()),
  user_id: Type.Optional(Type.String()),
  obj: Type.Optional(Type.String()),
  act: Type.Optional(Type.String()),
  effect: Type.Optional(Type.Union([Type.Literal('allow'), Type.Literal('deny')])),
  expires_at: Type.Optional(Type.String({ format: 'date-time' })),
  event: Type.Optional(Type.Union(CHANGE_EVENTS.map((e) => Type.Literal(e)), { description: '`account_status` and `catalog`: which event happened' })),
  actor_id: Type.String(),
})

export const ChangesPage = Type.Object({
  items: Type.Array(ChangeItem),
  next_after: Type.Integer({ description: 'the `after` of the next page' }),
  horizon: Type.Integer({ description: 'the oldest revision still listed' }),
})
