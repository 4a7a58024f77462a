import { timingSafeEqual } from 'node:crypto'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import { ServiceError } from '../../domain/errors.js'
import type { ServiceMetrics } from '../serviceMetrics.js'
import { BEARER_PREFIX, asArray, isBearer } from './authentication.js'

export interface MetricsOptions {
  metrics: ServiceMetrics
  /** When set, /metrics answers only to this bearer token. */
  token: string | undefined
}

const LOGIN_ROUTE = '/v2/auth/login'

/**
 * Request latency per route, recorded by a hook each route gets when it is
 * declared (no per-request look-up of the route), login outcomes read from
 * the login route's status, and `GET /metrics` in Prometheus' text format.
 */
const metricsPlugin: FastifyPluginAsync<MetricsOptions> = async (app, { metrics, token }) => {
  app.addHook('onRoute', (route) => {
    if (route.url === '/metrics') return
    const methods = asArray(route.method)
    const record = new Map<string, (statusCode: number, seconds: number) => void>()
    for (const method of methods) record.set(method, metrics.recorder(method, route.url))
    // Most routes answer one method (the gateway's check and verify among them): their recorder is called without a look-up.
    // (A GET's HEAD twin may share this hook: its requests are still told apart by method.)
    const onlyMethod = methods.length === 1 ? methods[0] : undefined
    const only = onlyMethod === undefined ? undefined : record.get(onlyMethod)
    const login = route.url === LOGIN_ROUTE
    const hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      ;(request.method === onlyMethod ? only : record.get(request.method))?.(reply.statusCode, reply.elapsedTime / 1000)
      if (login) {
        const status = reply.statusCode
        if (status === 200) metrics.login('success')
        else if (status === 401) metrics.login('failure')
        else if (status === 429) metrics.login('limited')
      }
      done()
    }
    route.onResponse = [...asArray(route.onResponse), hook]
  })

  const expected = token === undefined ? undefined : Buffer.from(token)
  // The scheme's name in any case (RFC 7235), as for the API's tokens; the token compared in constant
  // time: it guards what the service reveals about its load and policy.
  const authorised = (header: string | undefined): boolean => {
    if (expected === undefined) return true
    if (header === undefined || !isBearer(header)) return false
    const given = Buffer.from(header.slice(BEARER_PREFIX.length).trim())
    return given.length === expected.length && timingSafeEqual(given, expected)
  }
  app.get(
    '/metrics',
    { config: { public: true }, schema: { hide: true } },
    async (request, reply) => {
      if (!authorised(request.headers.authorization)) throw new ServiceError('UNAUTHENTICATED')
      const text = await metrics.registry.metrics()
      return reply.type(metrics.registry.contentType).send(text)
    },
  )
}

export default fp(metricsPlugin, { fastify: '5.x', name: 'metrics' })
