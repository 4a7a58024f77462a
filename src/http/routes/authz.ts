import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { checkPermission, checkPermissions, checkSubject, type CheckContext } from '../../commands/permissionQueries.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { Act, CommandBody, Domain, Lang, MinRevision, Obj, ReadQuery, UserId, bearer, responses } from '../schemas/common.js'
import { CheckResultItem } from '../schemas/permissions.js'

const CheckQuery = ReadQuery({ obj: Obj, act: Act, domain: Type.Optional(Domain), user_id: Type.Optional(UserId) })
const BatchBody = CommandBody(
  'check-batch',
  Type.Object(
    {
      user_id: Type.Optional(UserId),
      min_revision: MinRevision,
      checks: Type.Array(Type.Object({ obj: Obj, act: Act, domain: Type.Optional(Domain) }, { additionalProperties: false }), {
        minItems: 1,
        maxItems: 100,
      }),
    },
    { additionalProperties: false },
  ),
  { checks: [{ obj: 'orders', act: 'refund' }, { obj: 'payouts', act: 'approve', domain: 'm-1001' }] },
)

// The two possible answers of a single check, serialised once.
const ANSWERS = { true: JSON.stringify(success({ allowed: true })), false: JSON.stringify(success({ allowed: false })) }

/** The gateway's hot path: answers from memory only. */
export const authzRoutes: FastifyPluginAsyncTypebox<{ ctx: CheckContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/authz/check',
    {
      config: { failClosedWhenStale: true },
      schema: {
        tags: ['authz'],
        summary: 'May this user do obj:act in this domain?',
        security: bearer,
        querystring: CheckQuery,
        response: responses(200, Type.Object({ allowed: Type.Boolean() }), [404]),
      },
    },
    // Synchronous and allocation-light: the answer is in memory, so no promise is made per check.
    (request, reply) => {
      const { query } = request
      const allowed = checkPermission(ctx, checkSubject(ctx, callerOf(request), query.user_id), query)
      reply.type('application/json; charset=utf-8').send(allowed ? ANSWERS.true : ANSWERS.false)
    },
  )
  app.post(
    '/v2/authz/check-batch',
    {
      config: { failClosedWhenStale: true, minRevisionInBody: true },
      schema: {
        tags: ['authz'],
        summary: 'check-batch: up to 100 checks for one subject, in request order',
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: BatchBody,
        response: responses(200, Type.Object({ results: Type.Array(CheckResultItem) }), [404, 413, 415]),
      },
    },
    (request, reply) => {
      const subject = checkSubject(ctx, callerOf(request), request.body.data.user_id)
      reply.send(success({ results: checkPermissions(ctx, subject, request.body.data.checks) }))
    },
  )
}
