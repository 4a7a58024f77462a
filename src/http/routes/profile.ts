import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { Account, Lang, bearer, responses } from '../schemas/common.js'

export const profileRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v2/profile',
    {
      schema: {
        tags: ['profile'],
        summary: "The caller's own account",
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        response: responses(200, Account),
      },
    },
    async (request) => success(callerOf(request).account),
  )
}
