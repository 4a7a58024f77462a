import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { getOwnPermissions } from '../../commands/permissionQueries.js'
import type { CommandContext } from '../../commands/context.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { Account, Domain, ReadQuery, bearer, responses } from '../schemas/common.js'
import { UserPermissionsData } from '../schemas/permissions.js'

export const profileRoutes: FastifyPluginAsyncTypebox<{ ctx: Pick<CommandContext, 'db' | 'engine'> }> = async (app, { ctx }) => {
  app.get(
    '/v2/profile',
    {
      schema: {
        tags: ['profile'],
        summary: "The caller's own account",
        security: bearer,
        querystring: ReadQuery(),
        response: responses(200, Account),
      },
    },
    async (request) => success(callerOf(request).account),
  )
  app.get(
    '/v2/profile/permissions',
    {
      schema: {
        tags: ['profile'],
        summary: "The caller's own effective permissions",
        security: bearer,
        querystring: ReadQuery({ domain: Type.Optional(Domain) }),
        response: responses(200, UserPermissionsData, [404]),
      },
    },
    async (request) => success(await getOwnPermissions(ctx, callerOf(request), request.query.domain)),
  )
}
