/**
 * A gRPC server for bench/grpc.ts, in a process of its own so its CPU time
 * can be read:
 *   node --import tsx bench/grpcServer.ts service <grpcPort>   the service (seeded, HTTP and gRPC)
 *   node --import tsx bench/grpcServer.ts bare <grpcPort>      a bare grpc-js server answering an empty Check
 * Prints `READY <httpPort> <token>` on stderr when listening, and on SIGUSR2
 * `LOOP <json>`: its event loop's delay since the last SIGUSR2 (p99 and max
 * in ms), so that a stall in the server is told from one in the sender, and
 * its garbage collections meanwhile (how many, their total and longest
 * pause in ms), so that a stall of the collector is told from the code's.
 */
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'
import { Server, ServerCredentials, type sendUnaryData } from '@grpc/grpc-js'
import { loadServiceProtos } from '../src/grpc/protos.js'
import app from '../src/http/app.js'
import { createFastify } from '../src/http/fastifyOptions.js'
import { startGrpc } from '../src/http/server.js'
import { benchDatabase, benchService, benchSubject, seedRules } from './seed.js'

const [mode, portText] = process.argv.slice(2)
const grpcPort = Number(portText)

const loop = monitorEventLoopDelay({ resolution: 1 })
loop.enable()
const gc = { count: 0, total: 0, max: 0 }
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gc.count++
    gc.total += entry.duration
    gc.max = Math.max(gc.max, entry.duration)
  }
}).observe({ entryTypes: ['gc'] })
process.on('SIGUSR2', () => {
  process.stderr.write(`LOOP ${JSON.stringify({ p99: loop.percentile(99) / 1e6, max: loop.max / 1e6, gc })}\n`)
  loop.reset()
  Object.assign(gc, { count: 0, total: 0, max: 0 })
})

if (mode === 'bare') {
  // The same library and the same .proto files, nothing decided: the ceiling the service is measured against.
  const server = new Server()
  server.addService(loadServiceProtos().extAuthz, { Check: (_call: unknown, callback: sendUnaryData<unknown>) => callback(null, { status: { code: 0 } }) })
  await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${grpcPort}`, ServerCredentials.createInsecure(), (error) => (error === null ? resolve() : reject(error))))
  process.stderr.write('READY 0 -\n')
  process.once('SIGTERM', () => server.tryShutdown(() => process.exit(0)))
} else {
  const { db } = await benchDatabase()
  await seedRules(db, 1000)
  const service = await benchService(db, 'info')
  const { token } = await benchSubject(service)
  const fastify = createFastify(service.config)
  await fastify.register(app, { service })
  await fastify.listen({ host: '127.0.0.1', port: 0 })
  const grpc = await startGrpc({ ...service.config, host: '127.0.0.1', grpc: { port: grpcPort, tls: null } }, service)
  const address = fastify.server.address()
  process.stderr.write(`READY ${typeof address === 'object' && address !== null ? address.port : 0} ${token}\n`)
  process.once('SIGTERM', () => {
    void Promise.all([grpc?.stop(1000), fastify.close()]).then(() => process.exit(0))
  })
}
