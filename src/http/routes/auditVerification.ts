import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { describeProblem, verifyAudit } from '../../commands/verifyAudit.js'
import { routePermissions } from '../../domain/permissions.js'
import { success } from '../envelope.js'
import { ReadQuery, bearer, responses } from '../../schemas/common.js'

const AuditVerificationData = Type.Object({
  valid: Type.Boolean(),
  rows: Type.Integer(),
  problem: Type.Union([
    Type.Object({ kind: Type.String(), id: Type.Union([Type.String(), Type.Null()]), message: Type.String() }),
    Type.Null(),
  ]),
})

/** The audit chain's state for the console, as `audit verify` prints it: the whole trail, so platform staff only. */
export const auditVerificationRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/admin/permissions/audit-log/verification',
    {
      config: { permission: routePermissions.permissionRead, principalTypes: ['system_owner'] },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: ReadQuery(),
        response: responses(200, AuditVerificationData),
      },
    },
    async () => {
      const { rows, problem } = await verifyAudit(ctx.db)
      return success({ valid: problem === null, rows, problem: problem === null ? null : { ...problem, message: describeProblem(problem) } })
    },
  )
}
