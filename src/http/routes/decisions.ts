import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { listDecisions } from '../../commands/listDecisions.js'
import { routePermissions } from '../../domain/permissions.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { bearer, responses } from '../../schemas/common.js'
import { DecisionsPage, DecisionsQuery } from '../../schemas/decisions.js'

/** The denial trail: the gateway decisions the `postgres` decision sink stored. */
export const decisionRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/admin/decisions',
    {
      config: { permission: routePermissions.permissionRead },
      schema: { tags: ['permissions'], security: bearer, querystring: DecisionsQuery, response: responses(200, DecisionsPage) },
    },
    async (request) => success(await listDecisions(ctx, callerOf(request), request.query)),
  )
}
