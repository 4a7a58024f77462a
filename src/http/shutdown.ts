import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { addServiceHeaders, rawRequestId } from './serviceHeaders.js'

/**
 * Exit code of a stop that the deadline cut short: connections were closed
 * with requests unanswered, or closing the service did not finish in time.
 * 124 is what timeout(1) reports for a command it had to stop.
 */
export const EXIT_FORCED = 124

/** The answer to a request that arrives once the stop has begun. */
export interface Refusal {
  status: number
  body: string
}

/**
 * The HTTP server's connections, followed from the first one on so that a
 * stop can tell idle ones from busy ones and close whatever is left at its
 * deadline. Node's own connection list only sees a connection once it has
 * sent a byte: a client that connects and never sends would hold the server
 * open forever.
 */
export class ConnectionDrain {
  private readonly sockets = new Set<Socket>()
  private stoppingNow = false

  constructor(private readonly server: Server) {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket)
      socket.once('close', () => this.sockets.delete(socket))
    })
  }

  /** Read by every answer's onSend hook: one boolean, nothing per request until the stop. */
  get stopping(): boolean {
    return this.stoppingNow
  }

  get openConnections(): number {
    return this.sockets.size
  }

  /**
   * Requests already received go on; from here every answer closes its
   * connection (the hook that reads `stopping`), a request that arrives on a
   * connection still open is refused at once, and connections without a
   * request in progress are closed.
   */
  stopTaking(refuse: (request: IncomingMessage) => Refusal, log: FastifyBaseLogger): void {
    this.stoppingNow = true
    // Fastify is the server's request listener; swapping it out now costs the
    // requests served before the stop nothing.
    for (const listener of this.server.listeners('request')) {
      this.server.removeListener('request', listener as (...args: unknown[]) => void)
    }
    this.server.on('request', (request: IncomingMessage, response: ServerResponse) => answerRefused(request, response, refuse, log))
    for (const socket of this.sockets) {
      if (socket.bytesRead === 0) socket.destroy()
    }
    this.server.closeIdleConnections()
  }

  /** Closes an answer's connection once it is idle, should the answer have left without `Connection: close`. */
  closeIdle(): void {
    this.server.closeIdleConnections()
  }

  /** Closes every connection still open, busy or not; returns how many there were. */
  forceClose(): number {
    const open = [...this.sockets].filter((socket) => !socket.destroyed)
    for (const socket of open) socket.destroy()
    this.server.closeAllConnections()
    return open.length
  }
}

function answerRefused(
  request: IncomingMessage,
  response: ServerResponse,
  refuse: (request: IncomingMessage) => Refusal,
  log: FastifyBaseLogger,
): void {
  // Not the Fastify instance's rule (its own id as reqId, an acceptable client id
  // only beside it): Fastify never sees this request, so the id that both the
  // log line and the answer carry is the client's acceptable x-request-id, else
  // the next of ours. The refusal is the only line it is on.
  const reqId = rawRequestId(request)
  const { status, body } = refuse(request)
  log.info(
    { reqId, req: { method: request.method, url: request.url, remoteAddress: request.socket.remoteAddress }, res: { statusCode: status } },
    'request refused: the server is stopping',
  )
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  }
  addServiceHeaders(headers, reqId, null)
  response.writeHead(status, headers)
  response.end(body)
  // A body the client is still sending is read and dropped, so it sees the answer rather than a reset.
  request.resume()
}

export interface StopOptions {
  signal: string
  /** The whole stop, from the signal to the service closed. */
  timeoutMs: number
  log: FastifyBaseLogger
  refuse: (request: IncomingMessage) => Refusal
  /** Runs once no connection is left; what it flushes (decision events) must be done by `deadline` (ms since the epoch). */
  closeService: (deadline: number) => Promise<void>
}

export interface StopOutcome {
  exitCode: number
  /** Connections the deadline closed. */
  forced: number
  ms: number
}

/**
 * Connections still open this long before the deadline are closed, so that
 * closing the service (the database pool waits for statements under way) has
 * time left before the process must be gone.
 */
export function forceAfterMs(timeoutMs: number): number {
  return timeoutMs - Math.min(1000, Math.floor(timeoutMs / 4))
}

/** How often a stop looks for connections that became idle without being told to close. */
const IDLE_SWEEP_MS = 100

/**
 * Stops the HTTP server within the deadline and then the service. Resolves
 * with the process's exit code: 0 when every request was answered and the
 * service closed in time, EXIT_FORCED when the deadline closed connections or
 * cut the service's close short, 1 when closing failed.
 */
export async function stopGracefully(fastify: FastifyInstance, drain: ConnectionDrain, options: StopOptions): Promise<StopOutcome> {
  const { log, timeoutMs } = options
  const began = Date.now()
  const elapsed = () => Date.now() - began
  log.info(
    { signal: options.signal, connections: drain.openConnections, timeoutMs },
    'stopping: finishing in-flight requests, refusing new ones',
  )
  drain.stopTaking(options.refuse, log)

  let forced = 0
  const sweep = setInterval(() => drain.closeIdle(), IDLE_SWEEP_MS)
  const force = setTimeout(() => {
    forced = drain.forceClose()
    log.warn({ forced, afterMs: elapsed() }, `shutdown deadline: closed ${forced} connection(s) still open`)
  }, forceAfterMs(timeoutMs))
  let failed = false
  try {
    await fastify.close()
  } catch (error) {
    failed = true
    log.error({ err: error }, 'closing the HTTP server failed')
  } finally {
    clearInterval(sweep)
    clearTimeout(force)
  }
  log.info({ forced, ms: elapsed() }, forced === 0 ? 'every request answered; no connection left' : 'no connection left')

  let deadline: NodeJS.Timeout | undefined
  const serviceClosed = await Promise.race([
    // The flush ends where the connections are forced, leaving the rest of the deadline to close the database.
    options.closeService(began + forceAfterMs(timeoutMs)).then(
      () => 'closed' as const,
      (error: unknown) => {
        log.error({ err: error }, 'closing the service failed')
        return 'failed' as const
      },
    ),
    new Promise<'late'>((resolve) => {
      deadline = setTimeout(() => resolve('late'), Math.max(0, timeoutMs - elapsed()))
    }),
  ])
  clearTimeout(deadline)
  if (serviceClosed === 'late') log.error({ timeoutMs }, 'the service did not close before the deadline')

  const exitCode = failed || serviceClosed === 'failed' ? 1 : forced > 0 || serviceClosed === 'late' ? EXIT_FORCED : 0
  const ms = elapsed()
  log.info({ exitCode, forced, ms }, exitCode === 0 ? `stopped in ${ms} ms` : `stopped in ${ms} ms, exit code ${exitCode}`)
  return { exitCode, forced, ms }
}
