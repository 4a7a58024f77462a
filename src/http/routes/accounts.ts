import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CommandContext } from '../../commands/context.js'
import { actorOf } from '../../commands/context.js'
import { onboardMerchant } from '../../commands/onboardMerchant.js'
import { registerAdmin } from '../../commands/registerAdmin.js'
import { routePermissions } from '../../domain/permissions.js'
import { withRootFlag } from '../../domain/root.js'
import { success } from '../envelope.js'
import { adminAccountRoutes } from './adminAccounts.js'
import { callerOf } from '../plugins/authentication.js'
import { CommandBody, CreatedAccount, Email, Lang, MerchantDisplayName, MerchantId, Name, Password, Phone, SubRoleCode, bearer, responses } from '../../schemas/common.js'

const RegisterBody = CommandBody(
  'register-admin',
  Type.Object(
    {
      email: Email,
      password: Password,
      name: Name,
      phone: Type.Optional(Phone),
      sub_role_code: SubRoleCode,
      merchant_id: Type.Optional(MerchantId),
    },
    { additionalProperties: false },
  ),
  { email: 'ana@example.com', password: 'a-long-passphrase', name: 'Ana', sub_role_code: 'support_agent', merchant_id: 'm-1001' },
)

const OnboardBody = CommandBody(
  'onboard-merchant',
  Type.Object(
    { merchant_id: MerchantId, email: Email, password: Password, name: Name, phone: Type.Optional(Phone), display_name: Type.Optional(MerchantDisplayName) },
    { additionalProperties: false },
  ),
  { merchant_id: 'm-1001', email: 'owner@m-1001.example', password: 'a-long-passphrase', name: 'Merchant owner', display_name: 'Acme Books' },
)

export const accountRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  await app.register(adminAccountRoutes, { ctx })

  app.post(
    '/v2/admin/register',
    {
      config: { permission: routePermissions.adminRegister },
      schema: {
        tags: ['accounts'],
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: RegisterBody,
        response: responses(201, CreatedAccount, [404, 409, 413, 415]),
      },
    },
    async (request, reply) => {
      const account = await registerAdmin(ctx, callerOf(request), request.body.data)
      return reply.code(201).send(success(withRootFlag(ctx.engine, account)))
    },
  )

  app.post(
    '/v2/admin/merchants',
    {
      config: { permission: routePermissions.merchantOnboard, principalTypes: ['system_owner'] },
      schema: {
        tags: ['accounts'],
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: OnboardBody,
        response: responses(201, CreatedAccount, [409, 413, 415]),
      },
    },
    async (request, reply) => {
      const account = await onboardMerchant(ctx, actorOf(callerOf(request)), request.body.data)
      return reply.code(201).send(success(withRootFlag(ctx.engine, account)))
    },
  )
}
