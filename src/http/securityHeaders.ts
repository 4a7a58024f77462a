import type { FastifyInstance } from 'fastify'
import helmet from 'helmet'

/**
 * helmet's security headers on every answer of `fastify`'s routes (the admin
 * API and `/docs`; never the gateway's hot path). The middleware is built
 * once here: the Fastify plugin for helmet builds it again for every request
 * (options merged, directives parsed), which a profile of the admin routes
 * showed as their largest cost of the service's own.
 *
 * `nosniff` is left to serviceHeaders.ts, which sets it on every answer;
 * `upgrade-insecure-requests` is off so `/docs` also works over plain HTTP.
 */
export function securityHeaders(fastify: FastifyInstance): void {
  const apply = helmet({ xContentTypeOptions: false, contentSecurityPolicy: { directives: { upgradeInsecureRequests: null } } })
  fastify.addHook('onRequest', (request, reply, done) => {
    apply(request.raw, reply.raw, (error) => done(error instanceof Error ? error : undefined))
  })
}
