import { Type } from '@sinclair/typebox'
import { CHANGE_EVENTS, CHANGE_KINDS, type ChangeEvent, type ChangeKind } from '../domain/changeItems.js'
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
  // Enums, not unions of literals: the serializer writes a thousand items without trying each branch.
  kind: Type.Unsafe<ChangeKind>({ type: 'string', enum: [...CHANGE_KINDS] }),
  domain: Type.String(),
  sub_role: Type.Optional(Type.String()),
  user_id: Type.Optional(Type.String()),
  obj: Type.Optional(Type.String()),
  act: Type.Optional(Type.String()),
  effect: Type.Optional(Type.Unsafe<'allow' | 'deny'>({ type: 'string', enum: ['allow', 'deny'] })),
  expires_at: Type.Optional(Type.String({ format: 'date-time' })),
  event: Type.Optional(Type.Unsafe<ChangeEvent>({ type: 'string', enum: [...CHANGE_EVENTS], description: '`account_status` and `catalog`: which event happened' })),
  actor_id: Type.String(),
})

export const ChangesPage = Type.Object({
  items: Type.Array(ChangeItem),
  next_after: Type.Integer({ description: 'the `after` of the next page' }),
  horizon: Type.Integer({ description: 'the oldest revision still listed' }),
})
