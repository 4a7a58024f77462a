import rateLimit from '@fastify/rate-limit'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Service } from '../compose.js'
import { ServiceError } from '../domain/errors.js'
import { RouteMap } from '../domain/routeMap.js'
import { mapError } from './errors.js'
import { createLocalizer } from './i18n/index.js'
import authentication from './plugins/authentication.js'
import authorization from './plugins/authorization.js'
import locale from './plugins/locale.js'
import revision from './plugins/revision.js'
import { accountRoutes } from './routes/accounts.js'
import { authRoutes } from './routes/auth.js'
import { authzRoutes } from './routes/authz.js'
import { healthRoutes } from './routes/health.js'
import { permissionRoutes } from './routes/permissions.js'
import { profileRoutes } from './routes/profile.js'
import { ErrorEnvelope } from './schemas/common.js'
import { createValidatorCompiler } from './validation.js'

export const BODY_LIMIT = 1024 * 1024

export interface AppOptions {
  service: Service
}

/** The whole HTTP API as one plugin: the runner and the tests register this same plugin. */
const app: FastifyPluginAsync<AppOptions> = async (fastify, { service }) => {
  const localizer = createLocalizer(service.config.defaultLocale)
  fastify.setValidatorCompiler(createValidatorCompiler())
  // Commands are JSON only: any other content type is a 415, not a string body.
  fastify.removeContentTypeParser('text/plain')
  fastify.addSchema(ErrorEnvelope)

  await fastify.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Admin permission service',
        description: 'Administrator accounts and permissions: Casbin RBAC with domains and explicit deny.',
        version: '2.0.0',
      },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  })
  await fastify.register(swaggerUi, { routePrefix: '/docs' })
  await fastify.register(rateLimit, { global: false })
  await fastify.register(locale, { localizer })

  fastify.setErrorHandler((error, request, reply) => {
    const t = request.t ?? localizer.translator(localizer.defaultLocale)
    const mapped = mapError(error, t, { bodyLimit: BODY_LIMIT })
    if (mapped.internal) request.log.error({ err: error }, 'request failed')
    else request.log.info({ response_code: mapped.body.response_code, status: mapped.status }, 'request refused')
    return reply.code(mapped.status).send(mapped.body)
  })
  fastify.setNotFoundHandler((request) => {
    throw new ServiceError('ROUTE_NOT_FOUND', { method: request.method, url: request.url.split('?')[0] ?? '' })
  })

  // Every answer says which revision of the store this replica's memory reflects (callback style: no promise per request).
  const { replica } = service
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    reply.header('x-policy-revision', replica.revisionText)
    done(null, payload)
  })

  await fastify.register(healthRoutes, { readiness: service.readiness })
  await fastify.register(async (api) => {
    const typed = api.withTypeProvider<TypeBoxTypeProvider>()
    await typed.register(authentication, { config: service.config, accounts: service.accounts })
    await typed.register(revision, { replica, waitMs: service.config.replication.minRevisionWaitMs })
    await typed.register(authorization, { engine: service.engine })
    await typed.register(authRoutes, {
      login: { db: service.db, passwords: service.passwords, tokens: service.tokens, maxFailures: service.config.loginAccountFailures },
      perMinute: service.config.loginRateLimitPerMinute,
    })
    await typed.register(profileRoutes, { ctx: service })
    await typed.register(accountRoutes, { ctx: service })
    await typed.register(permissionRoutes, { ctx: service })
    // The gateway's calls are not logged one by one unless CHECK_LOG_LEVEL asks for it: two log lines per check
    // would cost it about 40% of its throughput (measured with LOG_LEVEL=info).
    await typed.register(authzRoutes, {
      ctx: service,
      routeMap: service.config.routeMap === null ? null : new RouteMap(service.config.routeMap),
      logLevel: service.config.checkLogLevel,
    })
  })
}

export default fp(app, { fastify: '5.x', name: 'admin-permission-service' })
