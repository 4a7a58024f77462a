/**
 * A gRPC server for bench/grpc.ts, in a process of its own so its CPU time
 * can be read:
 *   node --import tsx bench/grpcServer.ts service <grpcPort>   the service (seeded, HTTP and gRPC)
 *   node --import tsx bench/grpcServer.ts bare <grpcPort>      a bare grpc-js server answering an empty Check
 *   node --import tsx bench/grpcServer.ts http2 <grpcPort>     a bare node:http2 responder giving the same answer, no gRPC library
 * Prints `READY <httpPort> <token>` on stderr when listening, and on SIGUSR2
 * `LOOP <json>`: its event loop's delay since the last SIGUSR2 (p99 and max
 * in ms), so that a stall in the server is told from one in the sender, and
 * its garbage collections meanwhile (how many, their total and longest
 * pause in ms, and how many of them were scavenges of the young generation
 * and how many mark-compacts of the whole heap), so that a stall of the
 * collector is told from the code's; and what the scavenges found and
 * kept: the young generation's bytes when each began (about what was
 * allocated since the one before), and the bytes of it still alive after
 * (copied within the young generation or promoted to the old one), whose
 * copying is most of a scavenge's pause.
 */
import { createServer } from 'node:http2'
import { GCProfiler } from 'node:v8'
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver, type NodeGCPerformanceDetail } from 'node:perf_hooks'
import { Server, ServerCredentials, type sendUnaryData } from '@grpc/grpc-js'
import { loadServiceProtos } from '../src/grpc/protos.js'
import app from '../src/http/app.js'
import { createFastify } from '../src/http/fastifyOptions.js'
import { startGrpc } from '../src/http/server.js'
import { benchDatabase, benchService, benchSubject, seedRules } from './seed.js'
import { grpcFrame } from './grpcH2load.js'

const [mode, portText] = process.argv.slice(2)
const grpcPort = Number(portText)

const loop = monitorEventLoopDelay({ resolution: 1 })
loop.enable()
const gc = { count: 0, total: 0, max: 0, scavenges: 0, markCompacts: 0 }
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gc.count++
    gc.total += entry.duration
    gc.max = Math.max(gc.max, entry.duration)
    const { kind } = (entry as PerformanceEntry & { detail: NodeGCPerformanceDetail }).detail
    if (kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) gc.scavenges++
    else if (kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) gc.markCompacts++
  }
}).observe({ entryTypes: ['gc'] })
let profiler = new GCProfiler()
profiler.start()

type HeapAt = ReturnType<GCProfiler['stop']>['statistics'][number]['beforeGC']
const youngBytes = (heap: HeapAt): number =>
  heap.heapSpaceStatistics.filter((space) => space.spaceName === 'new_space' || space.spaceName === 'new_large_object_space').reduce((sum, space) => sum + space.spaceUsedSize, 0)

/** Over the scavenges since the profiler started: the young generation's bytes at their start, and those alive after. */
function scavenged(): { young: number; kept: number } {
  const seen = { young: 0, kept: 0 }
  for (const gcRun of profiler.stop().statistics) {
    if (gcRun.gcType !== 'Scavenge') continue
    const young = youngBytes(gcRun.beforeGC)
    seen.young += young
    seen.kept += gcRun.afterGC.heapStatistics.usedHeapSize - (gcRun.beforeGC.heapStatistics.usedHeapSize - young)
  }
  profiler = new GCProfiler()
  profiler.start()
  return seen
}

process.on('SIGUSR2', () => {
  process.stderr.write(`LOOP ${JSON.stringify({ p99: loop.percentile(99) / 1e6, max: loop.max / 1e6, gc, scavenged: scavenged() })}\n`)
  loop.reset()
  Object.assign(gc, { count: 0, total: 0, max: 0, scavenges: 0, markCompacts: 0 })
})

if (mode === 'http2') {
  // The floor under both: Node's HTTP/2 alone answering every stream with the bare server's bytes (headers, the
  // length-prefixed OK CheckResponse, trailers grpc-status 0) once its request has ended, the request's frame read
  // but not decoded. Whatever tail this shows at a rate, no gRPC library on node:http2 can go below.
  const answer = grpcFrame(loadServiceProtos().extAuthz.Check?.responseSerialize({ status: { code: 0 } }) as Buffer)
  const server = createServer()
  server.on('stream', (stream) => {
    let length = 0
    stream.on('data', (chunk: Buffer) => (length += chunk.length))
    stream.on('end', () => {
      if (stream.destroyed) return
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true })
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': length >= 5 ? '0' : '13' }))
      stream.end(answer)
    })
  })
  await new Promise<void>((resolve) => server.listen(grpcPort, '127.0.0.1', resolve))
  process.stderr.write('READY 0 -\n')
  process.once('SIGTERM', () => server.close(() => process.exit(0)))
} else if (mode === 'bare') {
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
