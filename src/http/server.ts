import { randomUUID } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import Fastify, { type FastifyInstance } from 'fastify'
import { buildService, type Service } from '../compose.js'
import { loadConfig, type Config } from '../config.js'
import { countAccounts } from '../storage/accounts.js'
import { currentRevision } from '../storage/revision.js'
import app, { BODY_LIMIT } from './app.js'

/** Fastify with the service's options: body limit, proxy trust, request ids (echoed in `x-request-id`), redacted logs. */
export function createFastify(config: Pick<Config, 'logLevel' | 'trustProxy'>): FastifyInstance {
  const fastify = Fastify({
    bodyLimit: BODY_LIMIT,
    trustProxy: config.trustProxy,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    return503OnClosing: true,
    logger: {
      level: config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'req.headers.cookie', '*.password', '*.password_hash', '*.access_token'],
        censor: '[redacted]',
      },
    },
  })
  // Callback style: an async hook would cost every request a promise.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id)
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

export async function start(config: Config = loadConfig()): Promise<FastifyInstance> {
  const fastify = createFastify(config)
  const service = await buildService(config, { log: fastify.log })
  await announceFirstStart(fastify, service)
  fastify.log.info(
    { storage: config.storage.kind, accounts: service.accounts.size, revision: await currentRevision(service.db), model: config.modelPath },
    'service ready',
  )
  fastify.addHook('onClose', async () => service.close())
  await fastify.register(app, { service })
  await fastify.listen({ host: config.host, port: config.port })

  let stopping = false
  const stop = (signal: string) => {
    if (stopping) return
    stopping = true
    fastify.log.info({ signal }, 'stopping: finishing in-flight requests')
    fastify.close().then(
      () => process.exit(0),
      (error: unknown) => {
        fastify.log.error({ err: error }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  return fastify
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  start().catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error)
    process.stderr.write(`cannot start: ${message}\n`)
    process.exit(1)
  })
}
