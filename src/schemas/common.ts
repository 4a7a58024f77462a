import { Type, type TProperties, type TSchema } from '@sinclair/typebox'
import {
  DOMAIN_PATTERN,
  MERCHANT_ID_PATTERN,
  PERMISSION_PART_PATTERN,
  SUB_ROLE_CODE_PATTERN,
  UUID_PATTERN,
} from '../domain/identifiers.js'
import { ACCOUNT_STATUSES, GLOBAL_DOMAIN, PRINCIPAL_TYPES } from '../domain/principals.js'

/** Shared schema atoms; request and response types come from `Static<typeof X>`. */
export const Email = Type.String({ format: 'email', maxLength: 254, examples: ['ana@example.com'] })
export const Password = Type.String({ minLength: 8, maxLength: 256 })
/**
 * Free text a person reads: no control characters (NUL above all, which
 * PostgreSQL cannot store), no format characters (bidi overrides, zero-width
 * marks that make one name look like another) and no lone surrogates.
 */
const PLAIN_TEXT_PATTERN = '^[^\\p{Cc}\\p{Cf}\\p{Cs}]*$'

/** Free text of at most `maxLength` characters, for names and filters. */
export const PlainText = (minLength: number, maxLength: number) => Type.String({ minLength, maxLength, pattern: PLAIN_TEXT_PATTERN })

export const Name = PlainText(1, 200)
/** A merchant's name for people (its id when none is given). */
export const MerchantDisplayName = PlainText(1, 120)
export const Phone = Type.String({ minLength: 1, maxLength: 40, pattern: '^[0-9+()\\-. ]+$' })
export const SubRoleCode = Type.String({ pattern: SUB_ROLE_CODE_PATTERN, examples: ['support_agent'] })
export const MerchantId = Type.String({ pattern: MERCHANT_ID_PATTERN, examples: ['m-1001'] })
export const Domain = Type.String({ pattern: DOMAIN_PATTERN, examples: [GLOBAL_DOMAIN, 'm-1001'] })
export const UserId = Type.String({ pattern: UUID_PATTERN, examples: ['3f0c4b7e-9a3b-4c7e-9d2a-1b2c3d4e5f60'] })
export const Obj = Type.String({ pattern: PERMISSION_PART_PATTERN, examples: ['orders'] })
export const Act = Type.String({ pattern: PERMISSION_PART_PATTERN, examples: ['refund'] })
const PrincipalTypeSchema = Type.Union(PRINCIPAL_TYPES.map((p) => Type.Literal(p)))
export const AccountStatusSchema = Type.Union(ACCOUNT_STATUSES.map((s) => Type.Literal(s)))

export const Lang = Type.Optional(Type.String({ maxLength: 35, pattern: '^[A-Za-z0-9_-]*$', description: 'Response locale; wins over Accept-Language' }))

/** Read your writes: answer only once this replica has applied at least this revision (503 `902` after a bounded wait). */
export const MinRevision = Type.Optional(
  Type.Integer({
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    description:
      'Answer only from a replica at this revision or later: 0 to 2^53 - 1, in a query as decimal digits only (leading zeros read as the number; `1e3`, `0x3e8`, `+5` are refused with `100`)',
  }),
)

/** A listing's page (from 1) and page size (at most 100). */
export const Paging = {
  page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
}

/** The query string of a read: `lang`, `min_revision` and the route's own parameters. */
export function ReadQuery<T extends TProperties>(properties: T = {} as T) {
  return Type.Object({ ...properties, lang: Lang, min_revision: MinRevision })
}

/** A command body: `{ command: <name>, data: {...} }`. */
export function CommandBody<T extends TSchema>(name: string, data: T, example: Record<string, unknown>) {
  return Type.Object(
    { command: Type.Literal(name), data },
    { additionalProperties: false, examples: [{ command: name, data: example }] },
  )
}

export const Account = Type.Object({
  id: Type.String({ format: 'uuid' }),
  email: Type.String(),
  name: Type.String(),
  phone: Type.Union([Type.String(), Type.Null()]),
  principal_type: PrincipalTypeSchema,
  merchant_id: Type.Union([Type.String(), Type.Null()]),
  sub_role_code: Type.String(),
  is_root: Type.Boolean({ description: 'Its sub-role is root: it holds every permission, and its sub-role is neither given nor taken away' }),
  parent_role: Type.Union([PrincipalTypeSchema, Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  status: AccountStatusSchema,
})

/** The caller's own account (`GET /v2/profile`): whether it must replace a generated password is its own business only. */
export const ProfileAccount = Type.Composite([
  Account,
  Type.Object({
    must_change_password: Type.Boolean({
      description: 'the password was generated (first start, `password reset` on the command line): the console asks for a new one before anything else; `POST /v2/profile/password` clears it',
    }),
  }),
])

/** A registration's or onboarding's answer: the account and the store's revision after the write. */
export const CreatedAccount = Type.Composite([Account, Type.Object({ revision: Type.Integer() })])

export const FieldErrorSchema = Type.Object({ field: Type.String(), message: Type.String() })

export const ErrorEnvelope = Type.Object(
  {
    response_code: Type.String({ examples: ['100'] }),
    response_text: Type.String({ examples: ['The request is not valid.'] }),
    errors: Type.Optional(Type.Array(FieldErrorSchema)),
    resume_after: Type.Optional(Type.Integer({ description: '410 `508`: the revision to resume the change stream after, once the policy is read again' })),
  },
  { $id: 'ErrorEnvelope' },
)

export function SuccessEnvelope<T extends TSchema>(data: T) {
  return Type.Object({
    response_code: Type.Literal('001'),
    response_text: Type.Literal('Success'),
    data,
  })
}

const errorRef = Type.Ref('ErrorEnvelope')

/** Response schemas: the success shape plus the error envelope for the statuses a route can answer. */
export function responses<T extends TSchema>(status: 200 | 201, data: T, errorStatuses: number[] = []) {
  const result: Record<number, TSchema> = { [status]: SuccessEnvelope(data) }
  for (const code of [400, 401, 403, ...errorStatuses]) result[code] = errorRef
  return result
}

export const bearer = [{ bearerAuth: [] }]
