import net, { type Socket } from 'node:net'

/**
 * A TCP proxy on a free loopback port, put between a process and a database
 * to fake outages for that one process only: the database itself keeps
 * serving every other test file.
 */

export interface TcpProxyOptions {
  /** A loopback address ('127.0.0.1' when omitted): the proxy refuses to forward anywhere else. */
  targetHost?: string
  targetPort: number
}

/**
 * How `cut()` ends connections: 'reset' sends RST, as a crashed host or a
 * firewall reject would (callers see ECONNRESET); 'end' sends FIN, as a
 * server process that exits would (callers see an unexpected end of stream).
 */
export type CutMode = 'reset' | 'end'

export interface TcpProxyStats {
  /** Every connection the proxy accepted, including those it refused at once while cut. */
  accepted: number
  /** Connections accepted while cut and destroyed at once. */
  refused: number
  /** Connections currently held: forwarding, or silent in a blackhole. */
  open: number
  /** Bytes forwarded from clients to the target. */
  bytesToTarget: number
  /** Bytes forwarded from the target to clients. */
  bytesFromTarget: number
  /** Bytes that arrived, from either side, while blackholed and were thrown away. */
  bytesDropped: number
}

export type TcpProxyState = 'forwarding' | 'cut' | 'blackhole' | 'closed'

export interface TcpProxy {
  readonly port: number
  readonly state: TcpProxyState
  /** The same database URL with its host and port replaced by the proxy's; everything else, query included, kept. */
  url(databaseUrl: string): string
  /** Destroys every connection (both sides) and refuses new ones until `restore()`. */
  cut(mode?: CutMode): void
  /**
   * A silent partition: connections stay open but nothing passes either way
   * and what arrives is dropped; new connections are accepted and stay silent.
   */
  blackhole(): void
  /** Ends a cut or a blackhole; connections that were blackholed are destroyed, as a partition leaves them dead. */
  restore(): void
  /** Counters since start, as a snapshot. */
  stats(): TcpProxyStats
  /** Destroys everything and stops listening; safe to call more than once. */
  close(): Promise<void>
}

interface Pair {
  client: Socket
  /** Null for a connection accepted during a blackhole: the target never hears of it. */
  upstream: Socket | null
  silent: boolean
}

/**
 * The loopback address to connect to, or null. 'localhost' is pinned to
 * 127.0.0.1 rather than resolved, so a host file can never send traffic
 * elsewhere; brackets are accepted since URL.hostname keeps them on IPv6.
 */
function loopbackAddress(host: string): string | null {
  if (host === 'localhost') return '127.0.0.1'
  if (host === '::1' || host === '[::1]') return '::1'
  return net.isIPv4(host) && host.startsWith('127.') ? host : null
}

/**
 * Ends one side of a pair. An RST can only be sent on an established
 * connection; one still connecting is simply abandoned. Nor can it be sent
 * while the socket's own FIN is queued (end() called, the shutdown not yet
 * done, as when the other side has just half-closed): libuv refuses the
 * reset (EINVAL) and Node then never closes the handle, so the socket never
 * emits 'close' and the process spins at exit waiting for it. Such a socket
 * is destroyed instead; its FIN is on its way anyway.
 */
export function closeSocket(socket: Socket, mode: CutMode): void {
  if (socket.destroyed) return
  const finQueued = socket.writableEnded && !socket.writableFinished
  if (mode === 'reset' && !socket.connecting && !finQueued) socket.resetAndDestroy()
  else socket.destroy()
}

export async function startTcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  const loopback = loopbackAddress(options.targetHost ?? '127.0.0.1')
  if (loopback === null) throw new Error(`tcpProxy only forwards to loopback, not ${options.targetHost}`)
  const targetHost = loopback
  const { targetPort } = options
  if (!Number.isInteger(targetPort) || targetPort <= 0 || targetPort > 65535) throw new Error(`bad target port ${targetPort}`)

  let state: TcpProxyState = 'forwarding'
  let cutMode: CutMode = 'reset'
  const pairs = new Set<Pair>()
  const counters = { accepted: 0, refused: 0, bytesToTarget: 0, bytesFromTarget: 0, bytesDropped: 0 }

  function destroyPair(pair: Pair, mode: CutMode): void {
    pairs.delete(pair)
    closeSocket(pair.client, mode)
    if (pair.upstream !== null) closeSocket(pair.upstream, mode)
  }

  function silence(pair: Pair): void {
    pair.silent = true
    // Sockets paused for backpressure would otherwise hold what arrives instead of dropping it.
    pair.client.resume()
    pair.upstream?.resume()
  }

  function relay(from: Socket, to: Socket, pair: Pair, counter: 'bytesToTarget' | 'bytesFromTarget'): void {
    from.on('data', (chunk: Buffer) => {
      if (pair.silent) {
        counters.bytesDropped += chunk.length
        return
      }
      // The other side is gone and its 'close' is on its way; nothing could be delivered.
      if (to.destroyed) return
      counters[counter] += chunk.length
      if (!to.write(chunk)) {
        from.pause()
        to.once('drain', () => {
          if (!pair.silent) from.resume()
        })
      }
    })
    // Half-closes pass through so a client's FIN reaches the target in order, after its data.
    from.on('end', () => {
      if (!pair.silent) to.end()
    })
    from.on('close', () => {
      // In a partition neither side learns that the other went away; restore() reaps the pair.
      if (!pair.silent) destroyPair(pair, 'end')
    })
  }

  function accept(client: Socket): void {
    counters.accepted += 1
    // Without a listener a peer's reset would be an uncaught exception in the test process.
    client.on('error', () => {})
    if (state === 'cut' || state === 'closed') {
      counters.refused += 1
      closeSocket(client, cutMode)
      return
    }
    client.setNoDelay(true)
    if (state === 'blackhole') {
      const pair: Pair = { client, upstream: null, silent: true }
      pairs.add(pair)
      client.on('data', (chunk: Buffer) => {
        counters.bytesDropped += chunk.length
      })
      return
    }
    const upstream = net.connect({ host: targetHost, port: targetPort, allowHalfOpen: true })
    upstream.on('error', () => {})
    upstream.setNoDelay(true)
    const pair: Pair = { client, upstream, silent: false }
    pairs.add(pair)
    relay(client, upstream, pair, 'bytesToTarget')
    relay(upstream, client, pair, 'bytesFromTarget')
  }

  const server = net.createServer({ allowHalfOpen: true }, accept)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host: '127.0.0.1', port: 0 }, () => {
      server.off('error', reject)
      resolve()
    })
  })
  // A listening server's errors after start (e.g. EMFILE on accept) must not crash the test process.
  server.on('error', () => {})
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('tcpProxy: no TCP address')
  const port = address.port

  let closing: Promise<void> | null = null

  return {
    port,
    get state() {
      return state
    },
    url(databaseUrl) {
      const parsed = new URL(databaseUrl)
      const urlPort = parsed.port === '' ? 5432 : Number(parsed.port)
      // Rewriting a URL meant for another server would silently test the wrong thing.
      if (urlPort !== targetPort) throw new Error(`tcpProxy: ${parsed.host} is not the proxied port ${targetPort}`)
      parsed.hostname = '127.0.0.1'
      parsed.port = String(port)
      return parsed.toString()
    },
    cut(mode = 'reset') {
      if (state === 'closed') return
      state = 'cut'
      cutMode = mode
      for (const pair of [...pairs]) destroyPair(pair, mode)
    },
    blackhole() {
      if (state === 'closed') return
      state = 'blackhole'
      for (const pair of pairs) silence(pair)
    },
    restore() {
      if (state === 'closed') return
      state = 'forwarding'
      for (const pair of [...pairs]) if (pair.silent) destroyPair(pair, 'reset')
    },
    stats() {
      return { ...counters, open: pairs.size }
    },
    close() {
      if (closing !== null) return closing
      state = 'closed'
      for (const pair of [...pairs]) destroyPair(pair, 'reset')
      closing = new Promise<void>((resolve) => server.close(() => resolve()))
      return closing
    },
  }
}
