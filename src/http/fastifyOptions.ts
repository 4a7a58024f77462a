import type { Server } from 'node:http'
import SerializerSelector from '@fastify/fast-json-stringify-compiler'
import Fastify, { type FastifyHttpOptions, type FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { trustFunction } from '../domain/clientIp.js'
import { BODY_LIMIT } from './app.js'
import { putBehindFastPath } from './fastPath.js'
import { httpTimeouts, limitConnections } from './connectionLimits.js'
import { DeferredCompiles } from '../schemas/deferredCompile.js'
import { createLocalizer, type Localizer } from '../i18n/index.js'
import { parserRefusal, routerRefusal } from './rawAnswers.js'
import { DeferredLogger } from './requestLogger.js'
import { acceptedClientRequestId, nextRequestId } from './requestId.js'
import { serviceHeaders } from './serviceHeaders.js'
import { ConnectionDrain } from './shutdown.js'
import { kConnectionDrain } from './symbols.js'

export type FastifyConfig = Pick<Config, 'logLevel' | 'trustProxy' | 'defaultLocale' | 'connections'>

/**
 * The service's Fastify options: body limit, timeouts, proxy trust, request
 * ids, redacted logs, and the service's envelope for what the router and
 * the HTTP parser refuse before any route runs.
 */
export function fastifyOptions(config: FastifyConfig, localizer: Localizer, compiles = new DeferredCompiles()): FastifyHttpOptions<Server> {
  return {
    bodyLimit: BODY_LIMIT,
    // Each route's answer serialisers are built when first used, or by compiles.drain() (deferredCompile.ts).
    schemaController: { compilersFactory: { buildSerializer: deferredSerializers(compiles) } },
    ...httpTimeouts(config.connections),
    trustProxy: trustFunction(config.trustProxy),
    // Our own id for every request; the client's x-request-id is only logged beside it (childLoggerFactory).
    requestIdHeader: false,
    genReqId: nextRequestId,
    // The pino child is made only when the request writes a line (DeferredLogger): most checks write none.
    childLoggerFactory: (logger, bindings, options, raw) =>
      new DeferredLogger(logger, () => {
        // The bindings are this request's own object: adding to it costs no copy.
        const clientId = acceptedClientRequestId(raw.headers['x-request-id'])
        if (clientId !== undefined) bindings.client_request_id = clientId
        return bindings
      }, options),
    frameworkErrors: routerRefusal(localizer),
    clientErrorHandler: parserRefusal(localizer),
    // Requests that arrive while stopping are refused by the runner with the service's envelope
    // (ConnectionDrain); Fastify's own 503 has a body of its own.
    return503OnClosing: false,
    logger: {
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', '*.password', '*.password_hash', '*.access_token'],
        censor: '[redacted]',
      },
    },
  }
}

/** Fastify's own serialiser factory (fast-json-stringify), each serialiser built on first use. */
function deferredSerializers(compiles: DeferredCompiles): SerializerSelector.SerializerFactory {
  const build = SerializerSelector()
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options)
    return (route) => {
      const serializer = compiles.defer(() => compile(route))
      return (doc) => serializer()(doc)
    }
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set by createFastify(): the connections a stop drains. */
    [kConnectionDrain]?: ConnectionDrain
  }
}

/**
 * Fastify with the service's options, its connections counted and followed,
 * and the headers every answer has (serviceHeaders.ts).
 */
export function createFastify(config: FastifyConfig): FastifyInstance {
  const compiles = new DeferredCompiles()
  const fastify = Fastify(fastifyOptions(config, createLocalizer(config.defaultLocale), compiles))
  // Once listening, the serialisers no answer has built yet, in the background.
  fastify.addHook('onListen', (done) => {
    done()
    compiles.drain().catch((error: unknown) => fastify.log.error({ err: error }, 'an answer schema does not compile'))
  })
  const drain = new ConnectionDrain(fastify.server)
  fastify.decorate(kConnectionDrain, drain)
  // Fastify goes behind a slot the app may fill with a fast path (serveFirst); a stop swaps both out (ConnectionDrain).
  putBehindFastPath(fastify, () => drain.stopping)
  limitConnections(fastify.server, config.connections, fastify.log)
  serviceHeaders(fastify, () => drain.stopping)
  return fastify
}

/** The connections of a Fastify built by createFastify(), which a stop drains. */
export function connectionDrain(fastify: FastifyInstance): ConnectionDrain {
  const drain = fastify[kConnectionDrain]
  if (drain === undefined) throw new Error('this Fastify was not built by createFastify()')
  return drain
}
