import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { buildService, type Service } from '../compose.js'
import { loadConfig, type Config } from '../config.js'
import { ServiceError } from '../domain/errors.js'
import { countAccounts } from '../storage/accounts.js'
import { StorageUnavailableError, isStorageUnavailable, sqlState } from '../storage/db.js'
import { currentRevision } from '../storage/revision.js'
import app, { BODY_LIMIT } from './app.js'
import { mapError } from './errors.js'
import { createLocalizer } from './i18n/index.js'
import { ConnectionDrain, EXIT_FORCED, stopGracefully, type Refusal } from './shutdown.js'

/**
 * The runner: `node --import tsx src/http/server.ts`.
 *
 * Exit codes: 0 stopped cleanly (every request answered, the service closed
 * within SHUTDOWN_TIMEOUT_MS); 1 cannot start (the message says why) or
 * closing failed; 124 (EXIT_FORCED) the shutdown deadline closed connections
 * with requests unanswered or cut the service's close short.
 */

const drains = new WeakMap<FastifyInstance, ConnectionDrain>()

/** Fastify with the service's options: body limit, proxy trust, request ids (echoed in `x-request-id`), redacted logs. */
export function createFastify(config: Pick<Config, 'logLevel' | 'trustProxy'>): FastifyInstance {
  const fastify = Fastify({
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
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
  // Callback style: an async hook would cost every request a promise.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id)
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
      return await build(config, { log })
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
        process.exit(1)
      },
    )
}
