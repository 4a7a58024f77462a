import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ServiceError } from '../domain/errors.js'
import { BODY_LIMIT } from './app.js'
import { closeAfterLinger } from './connectionLimits.js'
import { mapError } from './errors.js'
import { rawRequestTranslator, type Localizer } from '../i18n/index.js'
import { serviceHeaderLines, setServiceHeaders } from './serviceHeaders.js'
import { nextRequestId } from './requestId.js'
import type { Refusal } from './shutdown.js'

/**
 * The answers given where no route and no hook runs: what the router and
 * Node's HTTP parser refuse, and requests that arrive while stopping. Each
 * still carries the service's envelope and the headers every answer has
 * (serviceHeaders.ts).
 */

/**
 * A path the router cannot read (a bad percent escape) or a path parameter
 * over its length limit: 400 or 414 `604`, without echoing the path or
 * naming the framework. No hook runs for these answers, so the headers
 * every answer has are set here.
 */
export function routerRefusal(localizer: Localizer) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const mapped = mapError(error, rawRequestTranslator(localizer, request.raw), { bodyLimit: BODY_LIMIT })
    if (mapped.internal) request.log.error({ err: error }, 'request failed')
    else request.log.info({ response_code: mapped.body.response_code, status: mapped.status }, 'request refused')
    setServiceHeaders(reply, null)
    void reply
      .code(mapped.status)
      .type('application/json; charset=utf-8')
      .send(JSON.stringify(mapped.body))
  }
}

/**
 * What Node's HTTP parser refuses (malformed request line or headers,
 * headers over 16 KB, a request that took too long to arrive, its body
 * included) never reaches
 * Fastify: the answer is written on the socket itself, as a complete
 * HTTP/1.1 response with the service's envelope, in the default locale (the
 * request's own headers could not be read). Status 431 for oversized
 * headers, 408 for a timeout, 400 otherwise; always code `604`. Fastify
 * calls it with itself as `this`.
 */
export function parserRefusal(localizer: Localizer) {
  // Sockets already answered: the parser reports every further chunk of a refused request again.
  const refused = new WeakSet<Socket>()
  return function (this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
    if (error.code === 'ECONNRESET' || socket.destroyed || refused.has(socket)) return
    refused.add(socket)
    // A response to an earlier request on this connection is under way, or this request's has begun: anything
    // written now would corrupt it. (A request whose body is still arriving has a response that has not begun.)
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage
    if (!socket.writable || (inFlight != null && (inFlight.headersSent || inFlight.req.complete))) {
      socket.destroy()
      return
    }
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    const mapped = mapError(new ServiceError('BAD_REQUEST'), localizer.translator(localizer.defaultLocale), { bodyLimit: BODY_LIMIT })
    const body = JSON.stringify(mapped.body)
    const reqId = nextRequestId()
    // The parser's error carries the raw bytes received: only its code is logged.
    this.log.info({ reqId, parserError: error.code, status, response_code: mapped.body.response_code }, 'request refused: not readable as HTTP')
    closeAfterLinger(
      socket,
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        serviceHeaderLines(reqId) +
        'Connection: close\r\n\r\n' +
        body,
    )
  }
}

/** The answer to a request that arrives while stopping: 503 `901` in the request's own locale. */
export function stoppingRefusal(localizer: Localizer): (request: IncomingMessage) => Refusal {
  return (request) => {
    const mapped = mapError(new ServiceError('NOT_READY'), rawRequestTranslator(localizer, request), { bodyLimit: BODY_LIMIT })
    return { status: mapped.status, body: JSON.stringify(mapped.body) }
  }
}
