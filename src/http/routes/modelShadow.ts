import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { shadowSummary, type ShadowState } from '../../commands/shadowSummary.js'
import { routePermissions } from '../../domain/permissions.js'
import { success } from '../envelope.js'
import { ReadQuery, bearer, responses } from '../../schemas/common.js'
import { ShadowSummaryData } from '../../schemas/shadow.js'

/**
 * GET /v2/admin/model/shadow: how the shadow model (SHADOW_MODEL_PATH) has
 * answered beside the live one. It speaks of every merchant's decisions,
 * so platform staff with `permission:read` only; merchant callers get 403
 * `301`, as on the other system-only routes.
 */
export const modelShadowRoutes: FastifyPluginAsyncTypebox<{ state: () => ShadowState }> = async (app, { state }) => {
  app.get(
    '/v2/admin/model/shadow',
    {
      config: { permission: routePermissions.permissionRead, principalTypes: ['system_owner'] },
      schema: { tags: ['permissions'], security: bearer, querystring: ReadQuery(), response: responses(200, ShadowSummaryData) },
    },
    async () => success(shadowSummary(state())),
  )
}
