import { pathToFileURL } from 'node:url'
import type { Config } from '../config.js'
import { loadConfig } from '../startup.js'
import { EXIT_MODEL_DECISIONS, ModelDecisionsRefused } from '../modelGate.js'
import { announceStart } from '../startNotice.js'
import { MissingPrivilegesError } from '../storage/privileges.js'
import app from './app.js'
import { connectionDrain, createFastify } from './fastifyOptions.js'
import { createLocalizer } from '../i18n/index.js'
import { stoppingRefusal } from './rawAnswers.js'
import { forceAfterMs, stopGracefully } from './shutdown.js'
import { buildWithRetry } from './startupRetry.js'
import { listenForStop } from './stopSignals.js'
import { startGrpcServer, type GrpcServer, type GrpcServerOptions } from '../grpc/server.js'
import { RouteMap } from '../domain/routeMap.js'
import { headerAuthenticator } from './plugins/authentication.js'
import type { Service } from '../compose.js'

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

/**
 * Starts the service and serves until SIGTERM or SIGINT; resolves with the
 * process's exit code. A signal during start-up ends the retries; whatever
 * happens, the process exits within SHUTDOWN_TIMEOUT_MS of the first signal.
 */
export async function run(config: Config): Promise<number> {
  const fastify = createFastify(config)
  const log = fastify.log
  const stop = listenForStop(log, config.shutdownTimeoutMs)

  const service = await buildWithRetry(config, log, stop.signal)
  if (service === null || stop.signal.aborted) {
    await service?.close()
    log.info({ signal: stop.received() }, 'stopped before the service started')
    return 0
  }
  let grpc: GrpcServer | null = null
  try {
    await announceStart(service, log)
    await fastify.register(app, { service })
    await fastify.listen({ host: config.host, port: config.port })
    grpc = await startGrpc(config, service)
    if (grpc !== null) log.info({ port: grpc.port, tls: config.grpc?.tls !== null }, `gRPC listening on port ${grpc.port}`)
  } catch (error) {
    await grpc?.stop(0)
    await fastify.close().catch(() => undefined)
    await service.close().catch(() => undefined)
    throw error
  }

  if (!stop.signal.aborted) await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }))
  // gRPC stops beside HTTP, its calls under way finishing within the same deadline, before the service closes.
  const grpcStopped = grpc?.stop(forceAfterMs(config.shutdownTimeoutMs))
  const outcome = await stopGracefully(fastify, connectionDrain(fastify), {
    signal: stop.received(),
    timeoutMs: config.shutdownTimeoutMs,
    log,
    refuse: stoppingRefusal(createLocalizer(config.defaultLocale)),
    closeService: async (deadline) => {
      await grpcStopped
      await service.close(deadline)
    },
  })
  return outcome.exitCode
}

/** The gRPC server when GRPC_PORT is set: the same service, route map and token rules as HTTP (tests replace parts). */
export function startGrpc(config: Config, service: Service, replace: Partial<GrpcServerOptions> = {}): Promise<GrpcServer> | null {
  if (config.grpc === null) return null
  return startGrpcServer({
    config: config.grpc,
    host: config.host,
    requestTimeoutMs: config.connections.requestTimeoutMs,
    ctx: service,
    routeMap: config.routeMap === null ? null : new RouteMap(config.routeMap),
    replica: service.replica,
    authenticate: headerAuthenticator({ config, accounts: service.accounts }),
    localizer: createLocalizer(config.defaultLocale),
    readiness: service.readiness,
    recorder: service.decisionLog,
    ...replace,
  })
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
