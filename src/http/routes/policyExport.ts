import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { exportPolicy } from '../../commands/exportPolicy.js'
import { ServiceError } from '../../domain/errors.js'
import { routePermissions } from '../../domain/permissions.js'
import { callerOf } from '../plugins/authentication.js'
import { Domain, ReadQuery, bearer, responses } from '../../schemas/common.js'
import { ROOT_SUB_ROLE, isRootAccount } from '../../domain/root.js'

/**
 * GET /v2/admin/permissions/export?domain=: the policy as Casbin CSV, the
 * same bytes `policy export [--domain D]` prints, header included (its scope
 * is what `policy import` checks). The whole policy names
 * every merchant's users and rules, so only system-owner callers with a
 * root sub-role get it: the guard refuses merchant callers (403 `301`) and
 * callers without `permission:read` (403 `300`), the route any other
 * non-root caller (403 `300`). An unknown domain is 404 `402`.
 */
export const policyExportRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/admin/permissions/export',
    {
      config: { permission: routePermissions.permissionRead, principalTypes: ['system_owner'] },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: ReadQuery({ domain: Type.Optional(Domain) }),
        response: {
          ...responses(200, Type.Null(), [404]),
          200: {
            content: { 'text/csv': { schema: Type.String() } },
          },
        },
      },
    },
    async (request, reply) => {
      const { account } = callerOf(request)
      if (!isRootAccount(ctx.engine, account)) throw new ServiceError('PERMISSION_DENIED', { permission: ROOT_SUB_ROLE })
      const { domain } = request.query
      const exported = await exportPolicy(ctx, { domain })
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="policy${domain === undefined ? '' : `-${domain}`}.csv"`)
        .send(exported.csv)
    },
  )
}
