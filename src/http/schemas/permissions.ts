import { Type } from '@sinclair/typebox'
import { Act, CommandBody, Domain, Obj } from './common.js'

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
