import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { SharedAuditVerifications, describeProblem } from '../../commands/verifyAudit.js'
import { ServiceError } from '../../domain/errors.js'
import { routePermissions } from '../../domain/permissions.js'
import { ROOT_SUB_ROLE, isRootAccount } from '../../domain/root.js'
import { callerOf } from '../plugins/authentication.js'
import { success } from '../envelope.js'
import { ReadQuery, bearer, responses } from '../../schemas/common.js'

const AuditVerificationData = Type.Object({
  valid: Type.Boolean(),
  rows: Type.Integer({ description: 'rows in the chain found whole, those behind the checkpoint included' }),
  read: Type.Integer({ description: 'rows this verification read: only those after the checkpoint, unless `full`' }),
  full: Type.Boolean(),
  problem: Type.Union([
    Type.Object({ kind: Type.String(), id: Type.Union([Type.String(), Type.Null()]), message: Type.String() }),
    Type.Null(),
  ]),
})

/**
 * The audit chain's state for the console: from the checkpoint the last
 * verification reached, so a visit reads only the rows written since. The
 * whole trail spans every merchant, so platform staff only; `full=true`
 * walks it from the first row, as `audit verify` does, and costs a walk of
 * the whole table, so only root callers may ask for it (403 `300` naming
 * `super_admin` otherwise, as the policy export answers).
 */
export const auditVerificationRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  const verifications = new SharedAuditVerifications(ctx.db)
  app.get(
    '/v2/admin/permissions/audit-log/verification',
    {
      config: { permission: routePermissions.permissionRead, principalTypes: ['system_owner'] },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: ReadQuery({ full: Type.Optional(Type.Boolean({ default: false })) }),
        response: responses(200, AuditVerificationData),
      },
    },
    async (request) => {
      const full = request.query.full === true
      if (full && !isRootAccount(ctx.engine, callerOf(request).account)) {
        throw new ServiceError('PERMISSION_DENIED', { permission: ROOT_SUB_ROLE })
      }
      const { rows, read, problem } = await verifications.run(full)
      return success({ valid: problem === null, rows, read, full, problem: problem === null ? null : { ...problem, message: describeProblem(problem) } })
    },
  )
}
