import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { getOwnPermissions } from '../../commands/permissionQueries.js'
import type { CommandContext } from '../../commands/context.js'
import { changePassword } from '../../commands/replacePassword.js'
import type { LoginLimits } from '../../domain/loginLimits.js'
import { withRootFlag } from '../../domain/root.js'
import type { TokenIssuer } from '../../security/tokens.js'
import { success } from '../envelope.js'
import { localisedPermissions } from '../../i18n/index.js'
import { callerOf } from '../plugins/authentication.js'
import { CommandBody, Domain, Lang, Password, ProfileAccount, ReadQuery, bearer, responses } from '../../schemas/common.js'
import { UserPermissionsData } from '../../schemas/permissions.js'
import { withRetryAfter } from './auth.js'

const PasswordBody = CommandBody(
  'change-password',
  Type.Object({ current_password: Type.String({ minLength: 1, maxLength: 256 }), new_password: Password }, { additionalProperties: false }),
  { current_password: 'the-old-passphrase', new_password: 'a-new-long-passphrase' },
)

const PasswordChanged = Type.Object({
  revision: Type.Integer(),
  /** A fresh token under the new credentials (absent when tokens come from an external issuer). */
  access_token: Type.Optional(Type.String()),
  token_type: Type.Optional(Type.Literal('Bearer')),
  expires_in: Type.Optional(Type.Integer()),
})

export const profileRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext & { tokens: TokenIssuer | null }; loginLimits: LoginLimits }> = async (
  app,
  { ctx, loginLimits },
) => {
  app.post(
    '/v2/profile/password',
    {
      schema: {
        tags: ['profile'],
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: PasswordBody,
        response: responses(200, PasswordChanged, [413, 415, 429]),
      },
    },
    async (request, reply) => {
      const { current_password: current, new_password: next } = request.body.data
      const { revision, account } = await withRetryAfter(reply, () => changePassword(ctx, loginLimits, callerOf(request), current, next))
      return success({ revision, ...(ctx.tokens !== null ? ctx.tokens.issue(account) : {}) })
    },
  )

  app.get(
    '/v2/profile',
    {
      schema: {
        tags: ['profile'],
        security: bearer,
        querystring: ReadQuery(),
        response: responses(200, ProfileAccount),
      },
    },
    async (request) => success(withRootFlag(ctx.engine, callerOf(request).account)),
  )
  app.get(
    '/v2/profile/permissions',
    {
      schema: {
        tags: ['profile'],
        security: bearer,
        querystring: ReadQuery({ domain: Type.Optional(Domain) }),
        response: responses(200, UserPermissionsData, [404]),
      },
    },
    async (request) => success(localisedPermissions(app.localizer, request.locale, await getOwnPermissions(ctx, callerOf(request), request.query.domain))),
  )
}
