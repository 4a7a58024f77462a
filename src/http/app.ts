import cors from '@fastify/cors'
import rateLimit from '@fastify/rate-limit'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Service } from '../compose.js'
import { ServiceError } from '../domain/errors.js'
import { loginLimits } from '../domain/loginLimits.js'
import { RouteMap } from '../domain/routeMap.js'
import { mapError } from './errors.js'
import { createLocalizer } from '../i18n/index.js'
import { boundedJsonParser } from './jsonBody.js'
import { swaggerOptions } from './openapi/index.js'
import { ServiceMetrics } from './serviceMetrics.js'
import authentication, { cachedAccount, credentialsRule, type TokenClaims } from './plugins/authentication.js'
import { VerifiedTokenCache } from './plugins/tokenCache.js'
import { serveFirst, stoppingOf } from './fastPath.js'
import { answerRevision } from './serviceHeaders.js'
import { gatewayFastPath } from './gatewayFastPath.js'
import { logsAt } from './requestLogger.js'
import authorization from './plugins/authorization.js'
import locale from './plugins/locale.js'
import metricsPlugin from './plugins/metrics.js'
import queryParameters from './plugins/queryParameters.js'
import revision from './plugins/revision.js'
import { accountRoutes } from './routes/accounts.js'
import { authRoutes } from './routes/auth.js'
import { authzRoutes } from './routes/authz.js'
import { consoleRoutes } from './routes/console.js'
import { healthRoutes } from './routes/health.js'
import { policyExportRoutes } from './routes/policyExport.js'
import { permissionRoutes } from './routes/permissions.js'
import { profileRoutes } from './routes/profile.js'
import { auditVerificationRoutes } from './routes/auditVerification.js'
import { modelShadowRoutes } from './routes/modelShadow.js'
import { merchantRoutes } from './routes/merchants.js'
import { subRoleRoutes } from './routes/subRoles.js'
import { changeRoutes } from './routes/changes.js'
import { decisionRoutes } from './routes/decisions.js'
import { registerShadowMetrics } from './shadowMetrics.js'
import { securityHeaders } from './securityHeaders.js'
import { ErrorEnvelope } from '../schemas/common.js'
import { createValidatorCompiler } from '../schemas/validation.js'

export const BODY_LIMIT = 1024 * 1024

export interface AppOptions {
  service: Service
}

/** A declared path as a pattern for concrete paths: `:name` stands for one segment, `*` for the rest. */
function pathPattern(url: string): RegExp {
  const source = url
    .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
    .replace(/:[A-Za-z0-9_]+/g, '[^/]+')
    .replace(/\*/g, '.*')
  return new RegExp(`^${source}$`)
}

/**
 * Follows the routes declared from here on; the function it returns gives,
 * for a path no route answered with the request's method, the methods its
 * routes do answer (for `Allow`), or undefined when none does. Asked only
 * on the way to a 404, so it may take its time.
 */
function declaredMethods(fastify: FastifyInstance): (path: string, method: string) => string | undefined {
  const declared = new Map<string, Set<string>>()
  fastify.addHook('onRoute', (route) => {
    const methods = declared.get(route.url) ?? new Set<string>()
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      // Cross-origin support answers OPTIONS on every path (`OPTIONS *`): that makes no path known.
      if (method !== 'OPTIONS') methods.add(method)
    }
    if (methods.size > 0) declared.set(route.url, methods)
  })
  let patterns: Array<[RegExp, Set<string>]> | undefined
  return (path, method) => {
    // Every route is declared before the first request.
    patterns ??= [...declared].map(([url, methods]): [RegExp, Set<string>] => [pathPattern(url), methods])
    const allowed = new Set<string>()
    for (const [pattern, methods] of patterns) {
      if (pattern.test(path)) for (const m of methods) allowed.add(m)
    }
    // A route that does answer this method (a static file that is missing) is a 404.
    return allowed.size === 0 || allowed.has(method) ? undefined : [...allowed].sort().join(', ')
  }
}

/** The whole HTTP API as one plugin: the runner and the tests register this same plugin. */
const app: FastifyPluginAsync<AppOptions> = async (fastify, { service }) => {
  const localizer = createLocalizer(service.config.defaultLocale)
  const validators = createValidatorCompiler()
  fastify.setValidatorCompiler(validators)
  // Once the server listens, the validators no request has compiled yet, in the background (validation.ts says why).
  fastify.addHook('onListen', (done) => {
    done()
    validators.compileDeferred().catch((error: unknown) => fastify.log.error({ err: error }, 'a route schema does not compile'))
  })
  // Commands are JSON only: any other content type is a 415, not a string body.
  fastify.removeContentTypeParser('text/plain')
  // JSON bodies are refused for their shape before they are parsed and validated: see jsonBody.ts.
  fastify.removeContentTypeParser('application/json')
  fastify.addContentTypeParser('application/json', boundedJsonParser(fastify.getDefaultJsonParser('error', 'error')))
  fastify.addSchema(ErrorEnvelope)
  const allowedMethods = declaredMethods(fastify)
  await fastify.register(queryParameters)
  // Set before any route is declared: a route keeps the error handler in force when it was declared.
  fastify.setErrorHandler((error, request, reply) => {
    const t = request.t ?? localizer.translator(localizer.defaultLocale)
    const mapped = mapError(error, t, { bodyLimit: BODY_LIMIT })
    if (mapped.internal) request.log.error({ err: error }, 'request failed')
    else request.log.info({ response_code: mapped.body.response_code, status: mapped.status }, 'request refused')
    return reply.code(mapped.status).send(mapped.body)
  })
  fastify.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? ''
    // OPTIONS keeps answering 404 unless cross-origin support takes it over.
    const allow = request.method === 'OPTIONS' ? undefined : allowedMethods(path, request.method)
    if (allow !== undefined) {
      void reply.header('allow', allow)
      throw new ServiceError('METHOD_NOT_ALLOWED')
    }
    throw new ServiceError('ROUTE_NOT_FOUND', { method: request.method, url: path })
  })

  // Registered first, so that every route declared after it gets its latency recorder.
  const metrics = new ServiceMetrics(service.replica, () => service.db.poolStats?.() ?? null, service.decisionLog)
  await fastify.register(metricsPlugin, { metrics, token: service.config.metricsToken })
  registerShadowMetrics(metrics.registry, service.shadow)
  // Off unless CORS_ORIGINS lists the admin UI's origins; then their browsers may call every /v2 route.
  if (service.config.corsOrigins.length > 0) {
    await fastify.register(cors, {
      origin: service.config.corsOrigins,
      methods: ['GET', 'HEAD', 'POST', 'DELETE'],
      allowedHeaders: ['authorization', 'content-type', 'accept-language', 'x-request-id'],
      exposedHeaders: ['x-policy-revision', 'x-request-id', 'retry-after', 'x-decision-id'],
      maxAge: 600,
    })
  }

  // The document's operations, responses and named schemas: src/http/openapi/ (openapi.json is written from it).
  await fastify.register(swagger, swaggerOptions())
  await fastify.register(async (docs) => {
    securityHeaders(docs)
    await docs.register(swaggerUi, { routePrefix: '/docs' })
  })
  await fastify.register(rateLimit, { global: false })
  await fastify.register(locale, { localizer })

  const { replica } = service
  const verified = new VerifiedTokenCache<TokenClaims>()
  const routeMap = service.config.routeMap === null ? null : new RouteMap(service.config.routeMap)
  // Every answer says which revision of the store this replica's memory reflects.
  answerRevision(fastify, replica)

  await fastify.register(healthRoutes, { readiness: service.readiness })
  await fastify.register(consoleRoutes)
  await fastify.register(async (api) => {
    const typed = api.withTypeProvider<TypeBoxTypeProvider>()
    await typed.register(authentication, { config: service.config, accounts: service.accounts, verified })
    await typed.register(revision, { replica, waitMs: service.config.replication.minRevisionWaitMs })
    await typed.register(authorization, { engine: service.engine })
    // The admin API answers with helmet's headers, in a context of its own so that the gateway's routes do not.
    await typed.register(async (admin) => {
      const rest = admin.withTypeProvider<TypeBoxTypeProvider>()
      securityHeaders(rest)
      const limits = loginLimits(service.config.loginAccountFailures)
      await rest.register(authRoutes, {
        login: { db: service.db, passwords: service.passwords, tokens: service.tokens, limits },
        perMinute: service.config.loginRateLimitPerMinute,
        ctx: service,
      })
      await rest.register(profileRoutes, { ctx: service, loginLimits: limits })
      await rest.register(accountRoutes, { ctx: service })
      await rest.register(permissionRoutes, { ctx: service })
      await rest.register(policyExportRoutes, { ctx: service })
      await rest.register(subRoleRoutes, { ctx: service })
      await rest.register(merchantRoutes, { ctx: service })
      await rest.register(auditVerificationRoutes, { ctx: service })
      await rest.register(changeRoutes, { ctx: service })
      await rest.register(decisionRoutes, { ctx: service })
      await rest.register(modelShadowRoutes, { state: () => ({ shadow: service.shadow, refusal: service.shadowRefusal }) })
    })
    // The gateway's calls are not logged one by one unless CHECK_LOG_LEVEL asks for it: two log lines per check
    // would cost it about 40% of its throughput (measured with LOG_LEVEL=info).
    await typed.register(authzRoutes, { ctx: service, routeMap, metrics, recorder: service.decisionLog, logLevel: service.config.checkLogLevel })
  })
  // The common case of a check or verify is answered before Fastify's hooks run (gatewayFastPath.ts): they
  // cost it about half of a bare Fastify route's throughput (docs/performance.md). Not while checks are logged
  // one by one (the fast path writes no line) nor with CORS (its headers are Fastify's).
  if (service.config.corsOrigins.length === 0 && !logsAt(service.config.checkLogLevel, 'info')) {
    const current = credentialsRule(service.config.jwt.mode)
    serveFirst(
      fastify,
      gatewayFastPath({
        ctx: service,
        routeMap,
        metrics,
        replica,
        cachedAccount: (header) => cachedAccount(verified, service.accounts, current, header),
        stopping: stoppingOf(fastify),
        recorder: service.decisionLog,
      }),
    )
  }
}

export default fp(app, { fastify: '5.x', name: 'admin-permission-service' })
