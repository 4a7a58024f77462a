/**
 * The real app on a seeded store, with production's settings (LOG_LEVEL=info,
 * the default CHECK_LOG_LEVEL, metrics, request ids, security headers):
 *   node --import tsx bench/server.ts <rules> [schema]
 * With a schema (PostgreSQL) it serves that already seeded store; without,
 * it seeds a fresh one. Prints `READY <port> <token>` on stderr when
 * listening (stdout carries the log, as in production).
 */
import app from '../src/http/app.js'
import { createFastify } from '../src/http/fastifyOptions.js'
import { findAccountByEmail } from '../src/storage/accounts.js'
import { BENCH_EMAIL, benchDatabase, benchService, benchSubject, seedRules } from './seed.js'

const rules = Number(process.argv[2] ?? 1000)
const schema = process.argv[3]
const { db } = await benchDatabase(schema)
if (schema === undefined) await seedRules(db, rules)
const service = await benchService(db, 'info')
if (schema === undefined) await benchSubject(service)
const clerk = await findAccountByEmail(db, BENCH_EMAIL)
if (clerk === null || service.tokens === null) throw new Error('the bench subject is missing')
const token = service.tokens.issue(clerk, 86400).access_token

const fastify = createFastify(service.config)
await fastify.register(app, { service })
await fastify.listen({ host: '127.0.0.1', port: 0 })
const address = fastify.server.address()
process.stderr.write(`READY ${typeof address === 'object' && address !== null ? address.port : 0} ${token}\n`)
process.once('SIGTERM', () => {
  void fastify.close().then(() => process.exit(0))
})
