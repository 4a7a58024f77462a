import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import type { CommandContext } from '../../commands/context.js'
import { AccountLoginLimitedError, login, type LoginContext } from '../../commands/login.js'
import { logout } from '../../commands/logout.js'
import { normaliseIp } from '../../domain/clientIp.js'
import { ServiceError } from '../../domain/errors.js'
import { success } from '../envelope.js'
import { callerOf, tokenOf } from '../plugins/authentication.js'
import { CommandBody, Email, Lang, bearer, responses } from '../../schemas/common.js'

const LoginBody = CommandBody(
  'login',
  Type.Object({ email: Email, password: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false }),
  { email: 'admin@example.com', password: 'correct horse battery staple' },
)
const TokenData = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
})

const LogoutBody = CommandBody(
  'logout',
  Type.Object(
    {
      everywhere: Type.Optional(
        Type.Boolean({ description: 'End every token of the account, not only the one presented (default false).' }),
      ),
    },
    { additionalProperties: false },
  ),
  { everywhere: false },
)
const LoggedOut = Type.Object({ revision: Type.Integer() })

/** Runs a password check; when the account's login limit refuses it, the 429 says when to try again. */
export async function withRetryAfter<T>(reply: FastifyReply, check: () => Promise<T>): Promise<T> {
  try {
    return await check()
  } catch (error) {
    // Headers set here survive into the error handler's answer.
    if (error instanceof AccountLoginLimitedError) reply.header('retry-after', String(error.retryAfterSeconds))
    throw error
  }
}

export const authRoutes: FastifyPluginAsyncTypebox<{ login: LoginContext; perMinute: number; ctx: CommandContext }> = async (app, options) => {
  app.post(
    '/v2/auth/login',
    {
      config: {
        public: true,
        rateLimit: {
          max: options.perMinute,
          timeWindow: 60_000,
          errorResponseBuilder: (_request, context) => new ServiceError('RATE_LIMITED', { after: context.after }),
        },
      },
      schema: {
        tags: ['auth'],
        querystring: Type.Object({ lang: Lang }),
        body: LoginBody,
        response: responses(200, TokenData, [429]),
      },
    },
    async (request, reply) => {
      const { email, password } = request.body.data
      const { token } = await withRetryAfter(reply, () => login(options.login, email, password, normaliseIp(request.ip)))
      // A bearer token must not be kept by browsers or proxies (RFC 6749 section 5.1).
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache')
      return success(token)
    },
  )

  // Any valid token may end itself: refused with 401 on every route and replica from then on.
  app.post(
    '/v2/auth/logout',
    {
      schema: {
        tags: ['auth'],
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: LogoutBody,
        response: responses(200, LoggedOut, [413, 415]),
      },
    },
    async (request) => success(await logout(options.ctx, callerOf(request), tokenOf(request), request.body.data.everywhere === true)),
  )
}
