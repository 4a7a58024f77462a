import { Type } from '@sinclair/typebox'
import { AUDIT_TARGET_TYPES, type AuditTargetType } from '../domain/audit.js'
import { REASON_KINDS } from '../engine/explain.js'
import { CHANGE_KINDS, MAX_CHANGES_PER_CALL } from '../domain/permissionChanges.js'
import { Act, CommandBody, Domain, Obj, Paging, PlainText, ReadQuery, SubRoleCode, UserId } from './common.js'

export const PairData = Type.Object(
  {
    obj: Obj,
    act: Act,
    domain: Type.Optional(Domain),
    dry_run: Type.Optional(Type.Boolean({ description: 'Preview only: the same checks, nothing written or audited, the answer says who gains or loses the pair' })),
  },
  { additionalProperties: false },
)
const pairExample = { obj: 'orders', act: 'refund', domain: 'm-1001' }

export const pairCommand = (name: string) => CommandBody(name, PairData, pairExample)

/** grant- and deny-user-permission: the pair, and the instant at which the override stops counting (none: never). */
export const OverrideData = Type.Composite([PairData, Type.Object({ expires_at: Type.Optional(Type.String({ format: 'date-time', maxLength: 40 })) })], {
  additionalProperties: false,
})
export const overrideCommand = (name: string) => CommandBody(name, OverrideData, { ...pairExample, expires_at: '2030-01-31T18:00:00Z' })

/** One change of apply-permission-changes: a role kind names `sub_role`, a user kind `user_id`; only user grants and denies take `expires_at`. */
export const PermissionChangeItem = Type.Object(
  {
    kind: Type.Union(CHANGE_KINDS.map((k) => Type.Literal(k))),
    sub_role: Type.Optional(SubRoleCode),
    user_id: Type.Optional(UserId),
    obj: Obj,
    act: Act,
    domain: Type.Optional(Domain),
    expires_at: Type.Optional(Type.String({ format: 'date-time', maxLength: 40 })),
  },
  { additionalProperties: false },
)

export const ApplyChangesData = Type.Object(
  {
    changes: Type.Array(PermissionChangeItem, { minItems: 1, maxItems: MAX_CHANGES_PER_CALL }),
    dry_run: Type.Optional(Type.Boolean({ description: "Preview only: the same checks, nothing written or audited, `preview` says who gains or loses what by the whole list's net effect" })),
  },
  { additionalProperties: false },
)

export const applyChangesCommand = CommandBody('apply-permission-changes', ApplyChangesData, {
  changes: [
    { kind: 'role_grant', sub_role: 'support_agent', obj: 'orders', act: 'refund', domain: 'm-1001' },
    { kind: 'user_deny', user_id: '3f0c4b7e-9a3b-4c7e-9d2a-1b2c3d4e5f60', obj: 'orders', act: 'refund', expires_at: '2030-01-31T18:00:00Z' },
  ],
})

const PairInDomain = Type.Object({ obj: Type.String(), act: Type.String(), domain: Type.String() })

/** A dry run's answer: how many users' decisions of the pair would change, and up to 50 of them by e-mail. */
export const AccessPreview = Type.Object({
  users_gaining: Type.Integer(),
  users_losing: Type.Integer(),
  sample: Type.Array(
    Type.Object({ user_id: Type.String(), email: Type.String(), gains: Type.Array(PairInDomain), loses: Type.Array(PairInDomain) }),
    { maxItems: 50 },
  ),
})

export const RoleChangeData = Type.Object({
  changed: Type.Boolean(),
  revision: Type.Integer(),
  sub_role_code: Type.String(),
  obj: Type.String(),
  act: Type.String(),
  domain: Type.String(),
  preview: Type.Optional(AccessPreview),
})

export const UserChangeData = Type.Object({
  changed: Type.Boolean(),
  revision: Type.Integer(),
  user_id: Type.String(),
  obj: Type.String(),
  act: Type.String(),
  domain: Type.String(),
  effect: Type.Union([Type.Literal('allow'), Type.Literal('deny'), Type.Null()]),
  /** When the override stops counting; null when it does not expire (or after a revoke). */
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  preview: Type.Optional(AccessPreview),
})

export const AppliedChangesData = Type.Object({
  /** The revision the whole list made (the current one for a dry run, or when nothing changed). */
  revision: Type.Integer(),
  /** How many changes altered anything. */
  changed: Type.Integer(),
  results: Type.Array(Type.Object({ index: Type.Integer(), changed: Type.Boolean() }), { maxItems: MAX_CHANGES_PER_CALL }),
  preview: Type.Optional(AccessPreview),
})

export const CatalogItem = Type.Object({
  obj: Type.String(),
  act: Type.String(),
  label: Type.String(),
  group_name: Type.String(),
  is_active: Type.Boolean(),
  scope: Type.Union([Type.Literal('platform'), Type.Literal('any')], {
    description: '`platform`: only system-owner users can ever use the pair (never granted, denied or overridden in a merchant domain or for a merchant user); `any`: the rest',
  }),
})

const RolePair = Type.Object({ obj: Type.String(), act: Type.String(), domain: Type.String(), label: Type.String(), group_name: Type.String() })

export const RolePermissionsData = Type.Object({
  sub_role_code: Type.String(),
  domain: Type.String(),
  is_root: Type.Boolean(),
  permissions: Type.Array(RolePair),
  denied: Type.Array(RolePair, {
    description: "The pairs the sub-role is denied in the domain or in `global` (`role_deny`); a deny wins over a grant, and no command lifts it (a policy import does)",
  }),
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
      expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    }),
  ),
})

export const AuditQuery = ReadQuery({
  target_type: Type.Optional(Type.Unsafe<AuditTargetType>({ type: 'string', enum: [...AUDIT_TARGET_TYPES] })),
  target_id: Type.Optional(PlainText(1, 200)),
  action: Type.Optional(PlainText(1, 64)),
  actor: Type.Optional(PlainText(1, 320)),
  target: Type.Optional(PlainText(1, 320)),
  from: Type.Optional(Type.String({ format: 'date-time' })),
  until: Type.Optional(Type.String({ format: 'date-time' })),
  ...Paging,
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
  actor_email: Type.Union([Type.String(), Type.Null()]),
  actor_name: Type.Union([Type.String(), Type.Null()]),
  target_email: Type.Union([Type.String(), Type.Null()]),
  target_name: Type.Union([Type.String(), Type.Null()]),
})

export const HoldersQuery = ReadQuery({ obj: Obj, act: Act, domain: Type.Optional(Domain), ...Paging })

export const HoldersData = Type.Object({
  domain: Type.String(),
  items: Type.Array(
    Type.Object({
      user_id: Type.String(),
      email: Type.String(),
      sub_role_code: Type.String(),
      via: Type.Union([Type.Literal('root'), Type.Literal('role'), Type.Literal('user')]),
    }),
  ),
  page: Type.Integer(),
  page_size: Type.Integer(),
  total: Type.Integer(),
})

/** Why a check answered as it did (`explain=true`); `rule` is the Casbin p row that decided, when one did. */
export const CheckReason = Type.Object({
  kind: Type.Union(REASON_KINDS.map((kind) => Type.Literal(kind))),
  rule: Type.Optional(Type.Array(Type.String())),
})

export const CheckResultItem = Type.Object({
  obj: Type.String(),
  act: Type.String(),
  domain: Type.String(),
  allowed: Type.Boolean(),
  reason: Type.Optional(CheckReason),
})
