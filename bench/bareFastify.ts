/**
 * The yardstick of `npm run bench`: the same Fastify from node_modules, no
 * logger, no plugin, one route answering an envelope of the check's size.
 *   node --import tsx bench/bareFastify.ts
 * Prints `READY <port>` when listening.
 */
import Fastify from 'fastify'

/** The body of an allowed check, byte for byte the same size. */
const SAME_SIZE = JSON.stringify({ response_code: '001', response_text: 'Success', data: { allowed: true } })

const fastify = Fastify({ logger: false })
fastify.get('/bare', (_request, reply) => {
  reply.type('application/json; charset=utf-8').send(SAME_SIZE)
})
await fastify.listen({ host: '127.0.0.1', port: 0 })
const address = fastify.server.address()
process.stderr.write(`READY ${typeof address === 'object' && address !== null ? address.port : 0} -\n`)
process.once('SIGTERM', () => {
  void fastify.close().then(() => process.exit(0))
})
