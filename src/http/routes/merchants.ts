import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { listMerchants } from '../../commands/listMerchants.js'
import { routePermissions } from '../../domain/permissions.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { Paging, PlainText, ReadQuery, bearer, responses } from '../../schemas/common.js'

const MerchantItem = Type.Object({
  merchant_id: Type.String(),
  display_name: Type.String({ description: "The merchant's name for people; its id when it was onboarded without one" }),
  created_at: Type.String({ format: 'date-time' }),
  admins: Type.Integer(),
})

/** `q`: an id prefix, or part of a display name. */
const MerchantsQuery = ReadQuery({ q: Type.Optional(PlainText(1, 120)), ...Paging })

/** The merchant list of platform staff (onboarding is in accounts.ts). */
export const merchantRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/admin/merchants',
    {
      config: { permission: routePermissions.merchantOnboard, principalTypes: ['system_owner'] },
      schema: {
        tags: ['accounts'],
        security: bearer,
        querystring: MerchantsQuery,
        response: responses(200, Type.Object({ items: Type.Array(MerchantItem), page: Type.Integer(), page_size: Type.Integer(), total: Type.Integer() })),
      },
    },
    async (request) => success(await listMerchants(ctx, callerOf(request), request.query)),
  )
}
