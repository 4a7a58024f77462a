import { Type } from '@sinclair/typebox'
import { AUDIT_TARGET_TYPES, type AuditTargetType } from '../../domain/audit.js'
import { Act, CommandBody, Domain, Lang, MinRevision, Obj, PlainText } from './common.js'

export const PairData = Type.Object({ obj: Obj, act: Act, domain: Type.Optional(Domain) }, { additionalProperties: false })
const pairExample = { obj: 'orders', act: 'refund', domain: 'm-1001' }

export const pairCommand = (name: string) => CommandBody(name, PairData, pairExample)

export const RoleChangeData = Type.Object({
  changed: Type.Boolean(),
  revision: Type.Integer(),
  sub_role_code: Type.String(),
  obj: Type.String(),
  act: Type.String(),
  domain: Type.String(),
})

export const UserChangeData = Type.Object({
  changed: Type.Boolean(),
  revision: Type.Integer(),
  user_id: Type.String(),
  obj: Type.String(),
  act: Type.String(),
  domain: Type.String(),
  effect: Type.Union([Type.Literal('allow'), Type.Literal('deny'), Type.Null()]),
})

export const CatalogItem = Type.Object({
  obj: Type.String(),
  act: Type.String(),
  label: Type.String(),
  group_name: Type.String(),
  is_active: Type.Boolean(),
})

export const RolePermissionsData = Type.Object({
  sub_role_code: Type.String(),
  domain: Type.String(),
  is_root: Type.Boolean(),
  permissions: Type.Array(
    Type.Object({ obj: Type.String(), act: Type.String(), domain: Type.String(), label: Type.String(), group_name: Type.String() }),
  ),
})

export const UserPermissionsData = Type.Object({
  user_id: Type.String(),
  domain: Type.String(),
  sub_role_code: Type.String(),
  is_root: Type.Boolean(),
  permissions: Type.Array(
    Type.Object({
      obj: Type.String(),
      act: Type.String(),
      domain: Type.String(),
      source: Type.Union([Type.Literal('role'), Type.Literal('user')]),
      label: Type.String(),
      group_name: Type.String(),
    }),
  ),
})

export const CheckResultItem = Type.Object({ obj: Type.String(), act: Type.String(), domain: Type.String(), allowed: Type.Boolean() })

export const AuditQuery = Type.Object({
  target_type: Type.Optional(Type.Unsafe<AuditTargetType>({ type: 'string', enum: [...AUDIT_TARGET_TYPES] })),
  target_id: Type.Optional(PlainText(1, 200)),
  action: Type.Optional(PlainText(1, 64)),
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  lang: Lang,
  min_revision: MinRevision,
})

export const AuditItem = Type.Object({
  id: Type.Integer(),
  action: Type.String(),
  target_type: Type.String(),
  target_id: Type.String(),
  obj: Type.Union([Type.String(), Type.Null()]),
  act: Type.Union([Type.String(), Type.Null()]),
  domain: Type.Union([Type.String(), Type.Null()]),
  actor_id: Type.String(),
  actor_type: Type.String(),
  ip: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
})
