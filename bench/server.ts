/**
 * The real app on a seeded store, plus an empty JSON route of the same
 * response size and a route that reports the process's CPU time, in one
 * process:
 *   node --import tsx bench/server.ts <rules> [schema]
 * With a schema (PostgreSQL) it serves that already seeded store; without,
 * it seeds a fresh one. Prints `READY <port> <token>` when listening.
 */
import app from '../src/http/app.js'
import { createFastify } from '../src/http/fastifyOptions.js'
import { findAccountByEmail } from '../src/storage/accounts.js'
import { BENCH_EMAIL, benchConfig, benchDatabase, benchService, benchSubject, seedRules } from './seed.js'

const rules = Number(process.argv[2] ?? 1000)
const schema = process.argv[3]
const { db } = await benchDatabase(schema)
if (schema === undefined) await seedRules(db, rules)
const service = await benchService(db)
if (schema === undefined) await benchSubject(service)
const clerk = await findAccountByEmail(db, BENCH_EMAIL)
if (clerk === null || service.tokens === null) throw new Error('the bench subject is missing')
const token = service.tokens.issue(clerk, 86400).access_token

const fastify = createFastify({ ...benchConfig(), logLevel: 'silent' })
const sameSize = JSON.stringify({ response_code: '001', response_text: 'Success', data: { allowed: true } })
fastify.get('/bench/empty', async (_request, reply) => reply.type('application/json; charset=utf-8').send(sameSize))
// This process's CPU time so far (µs), read by the bench between load runs.
fastify.get('/bench/cpu', async () => {
  const { user, system } = process.cpuUsage()
  return { micros: user + system }
})
await fastify.register(app, { service })
await fastify.listen({ host: '127.0.0.1', port: 0 })
const address = fastify.server.address()
process.stdout.write(`READY ${typeof address === 'object' && address !== null ? address.port : 0} ${token}\n`)
process.once('SIGTERM', () => {
  void fastify.close().then(() => process.exit(0))
})
