import { randomUUID } from 'node:crypto'
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { buildService, type Service } from '../compose.js'
import { loadConfig, type Config } from '../config.js'
import { trustFunction } from '../domain/clientIp.js'
import { EXIT_MODEL_DECISIONS, ModelDecisionsRefused } from '../modelGate.js'
import { ServiceError } from '../domain/errors.js'
import { countAccounts } from '../storage/accounts.js'
import { StorageUnavailableError, isStorageUnavailable, sqlState } from '../storage/db.js'
import { MissingPrivilegesError } from '../storage/privileges.js'
import { currentRevision } from '../storage/revision.js'
import app, { BODY_LIMIT } from './app.js'
import { closeAfterLinger, httpTimeouts, limitConnections } from './connectionLimits.js'
import { mapError } from './errors.js'
import { createLocalizer, type Localizer } from './i18n/index.js'
import { ConnectionDrain, EXIT_FORCED, stopGracefully, type Refusal } from './shutdown.js'

/**
 * The runner: `node --import tsx src/http/server.ts`.
 *
 * Exit codes: 0 stopped cleanly (every request answered, the service closed
 * within SHUTDOWN_TIMEOUT_MS); 1 cannot start (the message says why) or
 * closing failed; 77 (EXIT_MISSING_PRIVILEGES) the database role lacks
 * privileges the service needs (the message names them); 78
 * (EXIT_MODEL_DECISIONS) the model fails its decisions file (each failing
 * line on stderr); 124 (EXIT_FORCED) the shutdown deadline closed
 * connections with requests unanswered or cut the service's close short.
 */

/** sysexits' EX_NOPERM: nothing to retry until someone grants what the message names. */
export const EXIT_MISSING_PRIVILEGES = 77

const drains = new WeakMap<FastifyInstance, ConnectionDrain>()

/**
 * A client's `x-request-id` is taken only when it is a short token of safe
 * characters: anything else (long, spaces, quotes, control or non-ASCII
 * characters) is ignored rather than cleaned, so logs never carry what a
 * client chose to smuggle in.
 */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/

/** The client's request id when it is acceptable, else undefined. */
function acceptedClientRequestId(header: string | string[] | undefined): string | undefined {
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : undefined
}

/**
 * The `x-request-id` an answer carries: the client's own id when it sent an
 * acceptable one (so it can match the answer to its request), else ours. The
 * log always has ours as `reqId` and theirs beside it as `client_request_id`.
 */
function echoedRequestId(request: FastifyRequest): string {
  return acceptedClientRequestId(request.headers['x-request-id']) ?? request.id
}

/** The locale a raw request asks for, read the way the locale plugin reads it (that plugin has not run for these answers). */
function rawTranslator(localizer: Localizer, request: IncomingMessage) {
  const query = request.url?.split('?')[1]
  const lang = query !== undefined ? (new URLSearchParams(query).get('lang') ?? undefined) : undefined
  const header = request.headers['accept-language']
  return localizer.translator(localizer.negotiate(lang, header))
}

/** Every answer, whichever path produced it, tells browsers not to guess its content type. */
const NOSNIFF = 'nosniff'

/**
 * Fastify with the service's options: body limit, proxy trust, request ids,
 * redacted logs, and the service's envelope for what the router and the HTTP
 * parser refuse before any route runs.
 */
export function createFastify(config: Pick<Config, 'logLevel' | 'trustProxy' | 'defaultLocale' | 'connections'>): FastifyInstance {
  const localizer = createLocalizer(config.defaultLocale)

  /**
   * A path the router cannot read (a bad percent escape) or a path parameter
   * over its length limit: 400 or 414 `604`, without echoing the path or
   * naming the framework. No hook runs for these answers, so the headers
   * every answer has are set here.
   */
  const frameworkError = (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const mapped = mapError(error, rawTranslator(localizer, request.raw), { bodyLimit: BODY_LIMIT })
    if (mapped.internal) request.log.error({ err: error }, 'request failed')
    else request.log.info({ response_code: mapped.body.response_code, status: mapped.status }, 'request refused')
    void reply
      .code(mapped.status)
      .header('x-request-id', echoedRequestId(request))
      .header('x-content-type-options', NOSNIFF)
      .type('application/json; charset=utf-8')
      .send(JSON.stringify(mapped.body))
  }

  // Sockets already answered: the parser reports every further chunk of a refused request again.
  const refused = new WeakSet<Socket>()

  /**
   * What Node's HTTP parser refuses (malformed request line or headers,
   * headers over 16 KB, a request that took too long to arrive, its body
   * included) never reaches
   * Fastify: the answer is written on the socket itself, as a complete
   * HTTP/1.1 response with the service's envelope, in the default locale (the
   * request's own headers could not be read). Status 431 for oversized
   * headers, 408 for a timeout, 400 otherwise; always code `604`.
   */
  const clientError = (error: NodeJS.ErrnoException, socket: Socket): void => {
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
    const reqId = randomUUID()
    // The parser's error carries the raw bytes received: only its code is logged.
    fastify.log.info({ reqId, parserError: error.code, status, response_code: mapped.body.response_code }, 'request refused: not readable as HTTP')
    closeAfterLinger(
      socket,
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Content-Type-Options: ${NOSNIFF}\r\n` +
        `X-Request-Id: ${reqId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    )
  }

  const fastify = Fastify({
    bodyLimit: BODY_LIMIT,
    ...httpTimeouts(config.connections),
    trustProxy: trustFunction(config.trustProxy),
    // Our own id for every request; the client's x-request-id is only logged beside it (childLoggerFactory).
    requestIdHeader: false,
    genReqId: () => randomUUID(),
    childLoggerFactory(logger, bindings, options, raw) {
      // The bindings are this request's own object: adding to it costs no copy.
      const clientId = acceptedClientRequestId(raw.headers['x-request-id'])
      if (clientId !== undefined) bindings.client_request_id = clientId
      return logger.child(bindings, options)
    },
    frameworkErrors: frameworkError,
    clientErrorHandler: clientError,
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
  })
  const drain = new ConnectionDrain(fastify.server)
  drains.set(fastify, drain)
  limitConnections(fastify.server, config.connections, fastify.log)
  // Callback style: an async hook would cost every request a promise.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', echoedRequestId(request))
    reply.header('x-content-type-options', NOSNIFF)
    // Once stopping, an answer tells its client not to send another request on this connection.
    if (drain.stopping) reply.header('connection', 'close')
    done(null, payload)
  })
  return fastify
}

async function announceFirstStart(fastify: FastifyInstance, service: Service): Promise<void> {
  if (service.firstAdmin !== null) {
    fastify.log.warn(
      { email: service.firstAdmin.email, password: service.firstAdmin.password },
      `FIRST START: created the system-owner super_admin ${service.firstAdmin.email} with password ${service.firstAdmin.password} (shown once; log in and keep it safe)`,
    )
    // Also on stderr, whatever LOG_LEVEL says: an operator who misses this line is locked out (until `cli password reset`).
    process.stderr.write(
      `\nFIRST START: the system-owner super_admin ${service.firstAdmin.email} was created with password ${service.firstAdmin.password}\n` +
        'It is shown once: log in and change it (POST /v2/profile/password), or reset it later with `npm run cli -- password reset --email E`.\n\n',
    )
  } else if (service.config.storage.kind === 'postgres' && (await countAccounts(service.db)) === 0) {
    fastify.log.warn(
      'no administrator exists yet: set BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD, or run `npm run cli -- bootstrap --email E --password P`',
    )
  }
}

/**
 * Whether a failed start is worth retrying: the database could not be
 * reached. isStorageUnavailable() alone also counts any Error without a code
 * (a model file that does not parse, a bug), and those must stop the start
 * at once; here a failure must name itself: StorageUnavailableError, a
 * socket error code (ECONNREFUSED, ENOTFOUND, ...) or an unavailability
 * SQLSTATE (the server starting up or shutting down).
 */
export function databaseUnreachable(error: unknown): boolean {
  return error instanceof StorageUnavailableError || (sqlState(error) !== undefined && isStorageUnavailable(error))
}

/** What went wrong, in words: StorageUnavailableError carries the driver's error as its cause. */
function reasonOf(error: unknown): string {
  const inner = error instanceof StorageUnavailableError && error.cause !== undefined ? error.cause : error
  if (inner instanceof AggregateError && inner.errors.length > 0) {
    return [...new Set(inner.errors.map((e: unknown) => reasonOf(e)))].join('; ')
  }
  if (inner instanceof Error) return inner.message !== '' ? inner.message : (sqlState(inner) ?? inner.name)
  return String(inner)
}

const FIRST_RETRY_MS = 250
const MAX_RETRY_MS = 5000

/**
 * Builds the service, retrying with exponential backoff while the database
 * cannot be reached, for at most DB_STARTUP_TIMEOUT_MS from the first
 * attempt (an attempt under way then still finishes). Resolves null when
 * `stop` fires first.
 */
export async function buildWithRetry(
  config: Config,
  log: FastifyBaseLogger,
  stop: AbortSignal,
  build: typeof buildService = buildService,
): Promise<Service | null> {
  const began = Date.now()
  const limitMs = config.database.startupTimeoutMs
  let delay = FIRST_RETRY_MS
  for (let attempt = 1; ; attempt++) {
    try {
      return await build(config, { log, gateModel: true })
    } catch (error) {
      if (!databaseUnreachable(error)) throw error
      if (stop.aborted) return null
      const reason = reasonOf(error)
      const remaining = limitMs - (Date.now() - began)
      if (remaining <= 0) {
        throw new Error(`the database is unavailable (${attempt} attempt(s) in ${Date.now() - began} ms, DB_STARTUP_TIMEOUT_MS=${limitMs}): ${reason}`)
      }
      const wait = Math.min(delay, remaining)
      log.warn({ attempt, reason, retryInMs: wait }, `the database is unavailable (attempt ${attempt}): ${reason}; retrying in ${wait} ms`)
      try {
        await sleep(wait, undefined, { signal: stop })
      } catch {
        return null
      }
      delay = Math.min(delay * 2, MAX_RETRY_MS)
    }
  }
}

/** The answer to a request that arrives while stopping: 503 `901` in the request's own locale. */
function stoppingRefusal(config: Config): (request: IncomingMessage) => Refusal {
  const localizer = createLocalizer(config.defaultLocale)
  return (request) => {
    const query = request.url?.split('?')[1]
    const lang = query !== undefined ? (new URLSearchParams(query).get('lang') ?? undefined) : undefined
    const header = request.headers['accept-language']
    const t = localizer.translator(localizer.negotiate(lang, header))
    const mapped = mapError(new ServiceError('NOT_READY'), t, { bodyLimit: BODY_LIMIT })
    return { status: mapped.status, body: JSON.stringify(mapped.body) }
  }
}

/**
 * Starts the service and serves until SIGTERM or SIGINT; resolves with the
 * process's exit code. A signal during start-up ends the retries; whatever
 * happens, the process exits within SHUTDOWN_TIMEOUT_MS of the first signal.
 */
export async function run(config: Config): Promise<number> {
  const fastify = createFastify(config)
  const log = fastify.log
  const drain = drains.get(fastify) as ConnectionDrain
  const stop = new AbortController()
  let received = ''
  const onSignal = (signal: NodeJS.Signals) => {
    // Kept for every signal, not once: under `npm start` a Ctrl-C is sent to the server twice (by the
    // terminal and forwarded by npm), and a second SIGINT left to its default would kill it mid-stop.
    if (stop.signal.aborted) {
      log.info({ signal }, 'already stopping')
      return
    }
    received = signal
    setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeoutMs }, `shutdown did not finish within ${config.shutdownTimeoutMs} ms: exiting`)
      process.exit(EXIT_FORCED)
    }, config.shutdownTimeoutMs)
    stop.abort()
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)

  const service = await buildWithRetry(config, log, stop.signal)
  if (service === null || stop.signal.aborted) {
    await service?.close()
    log.info({ signal: received }, 'stopped before the service started')
    return 0
  }
  try {
    await announceFirstStart(fastify, service)
    log.info(
      { storage: config.storage.kind, accounts: service.accounts.size, revision: await currentRevision(service.db), model: config.modelPath },
      'service ready',
    )
    await fastify.register(app, { service })
    await fastify.listen({ host: config.host, port: config.port })
  } catch (error) {
    await fastify.close().catch(() => undefined)
    await service.close().catch(() => undefined)
    throw error
  }

  if (!stop.signal.aborted) await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }))
  const outcome = await stopGracefully(fastify, drain, {
    signal: received,
    timeoutMs: config.shutdownTimeoutMs,
    log,
    refuse: stoppingRefusal(config),
    closeService: () => service.close(),
  })
  return outcome.exitCode
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  Promise.resolve()
    .then(() => run(loadConfig()))
    .then(
      (code) => process.exit(code),
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error)
        process.stderr.write(`cannot start: ${message}\n`)
        process.exit(
          error instanceof MissingPrivilegesError ? EXIT_MISSING_PRIVILEGES : error instanceof ModelDecisionsRefused ? EXIT_MODEL_DECISIONS : 1,
        )
      },
    )
}
