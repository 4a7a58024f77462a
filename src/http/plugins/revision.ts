import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Replica } from '../../replica/replica.js'
import { ServiceError } from '../../domain/errors.js'
import { asArray } from './authentication.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A decision route: answers 503 `903` rather than from a policy it cannot confirm is current. */
    failClosedWhenStale?: boolean
    /** The route reads `min_revision` from its command's `data` rather than from the query string. */
    minRevisionInBody?: boolean
    /** The query string is a proxied client's, not a request to this service: `min_revision` there is not ours. */
    foreignQuery?: boolean
    /** A decision route's refusal on a stale policy, told before the 503 is answered (the decision log's `stale_policy` event, the answer's decision id). */
    onStaleRefusal?: (request: FastifyRequest, reply: FastifyReply) => void
  }
}

export interface RevisionOptions {
  replica: Replica
  /** How long a read waits for `min_revision` before 503 `902`. */
  waitMs: number
}

/**
 * A revision in the query: decimal digits (leading zeros read as the
 * number). Validation coerces the text as `Number()` does, so `1e3`,
 * `0x3e8`, ` 1000` and `1000.0` would pass it as 1000; they are refused here
 * instead, so that every value that passes is one the wait has read.
 */
const DECIMAL = /^[0-9]+$/

/** Which revision checks a route gets: the hooks below and the errors its OpenAPI entry lists both read this. */
export interface RevisionChecks {
  /** Refuses with 503 `903` while the policy is unconfirmed. */
  failClosed: boolean
  /** Waits for the query string's `min_revision`. */
  minRevisionFromQuery: boolean
  /** Waits for the command's `data.min_revision`. */
  minRevisionFromBody: boolean
}

/**
 * Every GET (and HEAD) under /v2 waits for its `min_revision`, unless its
 * query string is a proxied client's; a route may read it from its body
 * instead; a decision route fails closed. Public routes get none of these.
 */
export function revisionChecks(route: Pick<RouteOptions, 'method' | 'url' | 'config'>): RevisionChecks {
  const config = route.config ?? {}
  if (config.public === true) return { failClosed: false, minRevisionFromQuery: false, minRevisionFromBody: false }
  const reads = asArray(route.method).some((m) => m === 'GET' || m === 'HEAD')
  return {
    failClosed: config.failClosedWhenStale === true,
    minRevisionFromQuery: reads && route.url.startsWith('/v2/') && config.foreignQuery !== true,
    minRevisionFromBody: config.minRevisionInBody === true,
  }
}

/**
 * Read your writes and fail closed, per route, attached when each route is
 * declared: every GET under /v2 waits (boundedly) for its `min_revision`,
 * after authentication and before the route's permission is checked, so the
 * guard also decides on a policy at least that new; decision routes refuse
 * to answer from a policy gone unconfirmed for too long.
 */
const revisionPlugin: FastifyPluginAsync<RevisionOptions> = async (app, { replica, waitMs }) => {
  const awaitRevision = (min: number, done: HookHandlerDoneFunction): void => {
    if (min <= replica.revision) return done()
    replica.waitFor(min, waitMs).then(
      (reached) => done(reached ? undefined : new ServiceError('REVISION_NOT_REACHED', { min_revision: min, revision: replica.revision })),
      done,
    )
  }

  // The query string is not validated yet at this point: a value that is no number at all (a repeated
  // parameter, one past 2^53 - 1) is left for validation to refuse with the schema's own words.
  const fromQuery = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const raw = (request.query as Record<string, unknown> | undefined)?.min_revision
    if (typeof raw !== 'string') return done()
    if (!DECIMAL.test(raw)) return done(new ServiceError('VALIDATION_FAILED', {}, [{ field: 'min_revision', message: 'pattern' }]))
    const min = Number(raw)
    if (min > Number.MAX_SAFE_INTEGER) return done()
    awaitRevision(min, done)
  }

  const fromBody = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const min = (request.body as { data?: { min_revision?: unknown } } | undefined)?.data?.min_revision
    if (typeof min !== 'number') return done()
    awaitRevision(min, done)
  }

  // One pair of hooks per route, made when it is declared: the request pays no look-up of its route's config.
  const failClosedHooks = (onStale: ((request: FastifyRequest, reply: FastifyReply) => void) | undefined) => {
    const refuseStale = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      onStale?.(request, reply)
      done(new ServiceError('POLICY_STALE'))
    }
    const failClosed = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      if (replica.isStale()) return refuseStale(request, reply, done)
      done()
    }
    // A decision route that also reads min_revision gets both checks in one hook: the gateway's path pays one call.
    const failClosedThenQuery = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      if (replica.isStale()) return refuseStale(request, reply, done)
      fromQuery(request, reply, done)
    }
    return { failClosed, failClosedThenQuery }
  }

  app.addHook('onRoute', (route) => {
    const { failClosed: stale, minRevisionFromQuery: query, minRevisionFromBody: body } = revisionChecks(route)
    const closed = stale ? failClosedHooks(route.config?.onStaleRefusal) : null
    const hook = closed !== null ? (query ? closed.failClosedThenQuery : closed.failClosed) : query ? fromQuery : null
    if (hook !== null) route.onRequest = [...asArray(route.onRequest), hook]
    if (body) route.preHandler = [...asArray(route.preHandler), fromBody]
  })
}

export default fp(revisionPlugin, { fastify: '5.x', name: 'revision', dependencies: ['authentication'] })
