import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { createSubRole, listSubRoles } from '../../commands/subRoles.js'
import { NEW_SUB_ROLE_CODE_PATTERN } from '../../domain/identifiers.js'
import { routePermissions } from '../../domain/permissions.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { CommandBody, Domain, Lang, Paging, PlainText, ReadQuery, bearer, responses } from '../../schemas/common.js'

export const SubRoleItem = Type.Object({
  code: Type.String(),
  label: Type.Union([Type.String(), Type.Null()]),
  is_root: Type.Boolean(),
  members: Type.Integer(),
  rules: Type.Integer(),
})

const SubRolesQuery = ReadQuery({ domain: Type.Optional(Domain), ...Paging })

const CreateSubRoleBody = CommandBody(
  'create-sub-role',
  Type.Object(
    { code: Type.String({ pattern: NEW_SUB_ROLE_CODE_PATTERN, examples: ['support_agent'] }), label: PlainText(1, 200), domain: Type.Optional(Domain) },
    { additionalProperties: false },
  ),
  { code: 'support_agent', label: 'Support agent' },
)

const CreatedSubRole = Type.Object({ code: Type.String(), label: Type.String(), domain: Type.String(), is_root: Type.Boolean(), revision: Type.Integer() })

/** The sub-role pickers' list and explicit creation with a label. */
export const subRoleRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/admin/sub-roles',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: SubRolesQuery,
        response: responses(200, Type.Object({ items: Type.Array(SubRoleItem), page: Type.Integer(), page_size: Type.Integer(), total: Type.Integer() }), [404]),
      },
    },
    async (request) => success(await listSubRoles(ctx, callerOf(request), request.query)),
  )

  app.post(
    '/v2/admin/sub-roles',
    {
      config: { permission: routePermissions.permissionAssign },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: CreateSubRoleBody,
        response: responses(201, CreatedSubRole, [404, 409, 413, 415]),
      },
    },
    async (request, reply) => reply.code(201).send(success(await createSubRole(ctx, callerOf(request), request.body.data))),
  )
}
