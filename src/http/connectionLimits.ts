import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import { addressListMatcher } from '../domain/clientIp.js'

/**
 * What one client may hold of the HTTP server, and how a connection closes.
 *
 * A request must arrive within REQUEST_TIMEOUT_MS (Node's `requestTimeout`,
 * set with Fastify's options: see httpTimeouts()); connections are counted
 * per client address as they open, and one past MAX_CONNECTIONS_PER_ADDRESS
 * is closed at once; an answer that closes its connection before the client
 * has finished sending (413, 415, 401 before the body is read, a parser
 * refusal) lingers: what still arrives is read and dropped, within bounds,
 * so that the client reads the answer instead of a reset (nginx's
 * lingering_close).
 */

/** How long a closing connection keeps reading what its client still sends. */
const LINGER_MS = 5000
/** How much it reads and drops at most: a few bodies over the 1 MiB limit. */
const LINGER_BYTES = 8 * 1024 * 1024

/** How often Node looks for requests past their deadline (its default, 30 s, would let a request run up to twice its timeout). */
const MAX_CHECK_INTERVAL_MS = 1000

/** Fastify's and Node's options for REQUEST_TIMEOUT_MS; headers must arrive within it too (Node's own headersTimeout is 60 s). */
export function httpTimeouts(connections: Config['connections']) {
  const requestTimeout = connections.requestTimeoutMs
  return {
    requestTimeout,
    http: {
      requestTimeout,
      headersTimeout: Math.min(60_000, requestTimeout),
      connectionsCheckingInterval: Math.min(MAX_CHECK_INTERVAL_MS, Math.max(10, Math.floor(requestTimeout / 4))),
    },
  }
}

/** How often a lingering connection looks at its clock and byte count. */
const LINGER_CHECK_MS = 100

/**
 * Ends the connection after what has been written (the answer) and closes
 * the socket when the client closes its side, or after LINGER_MS, or once
 * it has sent LINGER_BYTES more. Meanwhile Node's HTTP parser goes on
 * reading what arrives and drops it (the rest of a refused body, or
 * what it cannot parse). Closing at once would reset a connection whose
 * client is still sending, and a reset can discard the answer before the
 * client reads it.
 */
export function closeAfterLinger(socket: Socket, lastWords?: string): void {
  if (socket.destroyed) return
  if (lastWords !== undefined) socket.end(lastWords)
  else socket.end()
  if (socket.readableEnded) {
    socket.destroy()
    return
  }
  // Read through the parser, not a 'data' listener of our own: one would take the socket from the
  // parser, which may have stopped reading it, and nothing would start reading again.
  const since = Date.now()
  const bytesBefore = socket.bytesRead
  const check = setInterval(() => {
    if (Date.now() - since >= LINGER_MS || socket.bytesRead - bytesBefore > LINGER_BYTES) socket.destroy()
  }, LINGER_CHECK_MS)
  check.unref()
  socket.once('end', () => socket.destroy())
  socket.once('close', () => clearInterval(check))
}

type ClosingSocket = Socket & { destroySoon?: () => void }

/**
 * Node closes a connection after an answer with `Connection: close` through
 * `socket.destroySoon()`, which destroys the socket as soon as the answer
 * is written, whether or not its client is still sending: each connection's
 * destroySoon lingers instead.
 */
function lingerOnClose(socket: ClosingSocket): void {
  if (typeof socket.destroySoon === 'function') socket.destroySoon = () => closeAfterLinger(socket)
}

/** Counts each client address's open connections and closes those past the cap; lingers on close. */
export function limitConnections(server: Server, connections: Config['connections'], log: FastifyBaseLogger): void {
  const exempt = addressListMatcher(connections.exempt)
  const max = connections.maxPerAddress
  const open = new Map<string, number>()
  // Addresses already logged at the cap: one line when a client reaches it, not one per refused connection.
  const atCap = new Set<string>()

  server.on('connection', (socket: Socket) => {
    lingerOnClose(socket)
    const address = socket.remoteAddress
    if (max === 0 || address === undefined || exempt(address)) return
    const count = (open.get(address) ?? 0) + 1
    if (count > max) {
      if (!atCap.has(address)) {
        atCap.add(address)
        log.warn({ address, max }, `connections refused: ${address} holds ${max} connection(s), MAX_CONNECTIONS_PER_ADDRESS`)
      }
      socket.destroy()
      return
    }
    open.set(address, count)
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1
      if (left === 0) open.delete(address)
      else open.set(address, left)
      if (left < max) atCap.delete(address)
    })
  })
}
