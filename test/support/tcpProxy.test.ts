import { randomBytes } from 'node:crypto'
import net, { type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import t, { type Test } from 'tap'
import { postgresUrl } from '../helper.js'
import { closeSocket, startTcpProxy, type TcpProxy } from './tcpProxy.js'
import { onceOnPGlite } from './onceOnPGlite.js'

onceOnPGlite('a test support proxy')

/** How long "nothing arrives" is watched for: far above loopback latency, small enough to keep cases quick. */
const QUIET_MS = 300
const CASE = { timeout: 5000 }

async function waitFor(what: string, condition: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

interface Echo {
  port: number
  /** Server-side sockets still open. */
  sockets: Set<Socket>
  connections: number
  received: number
}

/** An echo server that counts what reaches it, so a test can tell that nothing got through. */
async function startEcho(t: Test): Promise<Echo> {
  const echo: Echo = { port: 0, sockets: new Set(), connections: 0, received: 0 }
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    echo.connections += 1
    echo.sockets.add(socket)
    socket.on('error', () => {})
    socket.on('data', (chunk: Buffer) => {
      echo.received += chunk.length
      socket.write(chunk)
    })
    socket.on('end', () => socket.end())
    socket.on('close', () => echo.sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('echo server has no TCP address')
  echo.port = address.port
  t.teardown(async () => {
    for (const socket of echo.sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return echo
}

async function startProxy(t: Test, echo: Echo): Promise<TcpProxy> {
  const proxy = await startTcpProxy({ targetHost: '127.0.0.1', targetPort: echo.port })
  t.teardown(() => proxy.close())
  return proxy
}

/** A client socket that records everything that happens to it. */
class Peer {
  readonly socket: Socket
  private readonly chunks: Buffer[] = []
  connected = false
  ended = false
  closed = false
  error: NodeJS.ErrnoException | null = null

  private constructor(port: number) {
    // Not half-open, like most real clients: a FIN from the other side closes the socket.
    this.socket = net.connect({ host: '127.0.0.1', port })
    this.socket.on('connect', () => (this.connected = true))
    this.socket.on('data', (chunk: Buffer) => this.chunks.push(chunk))
    this.socket.on('end', () => (this.ended = true))
    this.socket.on('error', (error: NodeJS.ErrnoException) => (this.error = error))
    this.socket.on('close', () => (this.closed = true))
  }

  /** Resolves once the socket connected or closed: a refused connection is something to assert on, not a failure. */
  static async open(t: Test, port: number): Promise<Peer> {
    const peer = new Peer(port)
    t.teardown(() => peer.socket.destroy())
    await waitFor('the connection to settle', () => peer.connected || peer.closed)
    return peer
  }

  get received(): Buffer {
    return Buffer.concat(this.chunks)
  }

  async roundTrip(text: string): Promise<void> {
    const before = this.received.length
    this.socket.write(text)
    await waitFor(`the echo of ${text}`, () => this.received.length >= before + text.length)
    if (this.received.subarray(before).toString() !== text) throw new Error(`echo of ${text} came back as ${this.received.subarray(before).toString()}`)
  }
}

t.test('forwards both ways, in order, with backpressure and half-close', CASE, async (t) => {
  const echo = await startEcho(t)
  const proxy = await startProxy(t, echo)
  t.not(proxy.port, echo.port)
  t.equal(proxy.state, 'forwarding')

  const peer = await Peer.open(t, proxy.port)
  await peer.roundTrip('hello')
  // Large enough to fill socket buffers, so the relay has to pause and resume.
  const big = randomBytes(8 * 1024 * 1024)
  peer.socket.write(big)
  await waitFor('the large echo', () => peer.received.length >= 5 + big.length, 4000)
  t.ok(peer.received.subarray(5).equals(big), 'a large payload comes back byte for byte')

  const total = 5 + big.length
  t.match(proxy.stats(), { accepted: 1, refused: 0, open: 1, bytesToTarget: total, bytesFromTarget: total, bytesDropped: 0 })

  peer.socket.end('tail')
  await waitFor('the close', () => peer.closed)
  t.ok(peer.ended, "the client's FIN reaches the target and the target's comes back")
  t.equal(peer.received.subarray(total).toString(), 'tail', 'data sent just before a FIN still arrives')
  t.equal(peer.error, null)
  await waitFor('the proxy to forget the pair', () => proxy.stats().open === 0)
  await waitFor('the target side to close', () => echo.sockets.size === 0)
})

t.test('several connections at once stay apart', CASE, async (t) => {
  const echo = await startEcho(t)
  const proxy = await startProxy(t, echo)
  const peers = await Promise.all([1, 2, 3].map(() => Peer.open(t, proxy.port)))
  await Promise.all(peers.map((peer, i) => peer.roundTrip(`peer-${i}-`.repeat(100))))
  t.equal(proxy.stats().open, 3)
  t.equal(echo.connections, 3)
})

t.test('cut resets every open connection on both sides and refuses new ones until restore', CASE, async (t) => {
  const echo = await startEcho(t)
  const proxy = await startProxy(t, echo)
  const first = await Peer.open(t, proxy.port)
  const second = await Peer.open(t, proxy.port)
  await first.roundTrip('one')
  await second.roundTrip('two')

  proxy.cut()
  t.equal(proxy.state, 'cut')
  await waitFor('both clients to close', () => first.closed && second.closed)
  t.equal(first.error?.code, 'ECONNRESET')
  t.equal(second.error?.code, 'ECONNRESET')
  await waitFor('the target sides to close', () => echo.sockets.size === 0)
  t.equal(proxy.stats().open, 0)

  const refused = await Peer.open(t, proxy.port)
  await waitFor('the refused connection to close', () => refused.closed)
  t.equal(refused.received.length, 0)
  t.equal(echo.connections, 2, 'the target never hears of a connection made during the cut')
  t.match(proxy.stats(), { accepted: 3, refused: 1, open: 0 })

  proxy.restore()
  t.equal(proxy.state, 'forwarding')
  const after = await Peer.open(t, proxy.port)
  await after.roundTrip('back')
  t.equal(echo.connections, 3)
})

t.test("cut('end') closes connections with an orderly end instead of a reset", CASE, async (t) => {
  const echo = await startEcho(t)
  const proxy = await startProxy(t, echo)
  const peer = await Peer.open(t, proxy.port)
  await peer.roundTrip('x')
  proxy.cut('end')
  await waitFor('the client to close', () => peer.closed)
  t.ok(peer.ended)
  t.equal(peer.error, null)
  await waitFor('the target side to close', () => echo.sockets.size === 0)

  const refused = await Peer.open(t, proxy.port)
  await waitFor('the refused connection to close', () => refused.closed)
  t.equal(refused.error, null)
})

t.test('blackhole holds connections open, delivers nothing either way, and never delivers it later', CASE, async (t) => {
  const echo = await startEcho(t)
  const proxy = await startProxy(t, echo)
  const held = await Peer.open(t, proxy.port)
  await held.roundTrip('before')
  const [targetSide] = [...echo.sockets]
  if (targetSide === undefined) throw new Error('the echo server has no connection')

  proxy.blackhole()
  t.equal(proxy.state, 'blackhole')
  held.socket.write('lost-from-client')
  targetSide.write('lost-from-server')

  const late = await Peer.open(t, proxy.port)
  t.ok(late.connected && !late.closed, 'a connection made during the blackhole is accepted')
  late.socket.write('into-the-void')
  const dropped = 'lost-from-client'.length + 'lost-from-server'.length + 'into-the-void'.length
  await waitFor('the proxy to drop what arrived', () => proxy.stats().bytesDropped === dropped)
  await sleep(QUIET_MS)

  t.equal(held.received.toString(), 'before', 'nothing reaches the client')
  t.equal(late.received.length, 0)
  t.equal(echo.received, 'before'.length, 'nothing reaches the target')
  t.equal(echo.connections, 1, 'the target never hears of the connection made during the blackhole')
  t.notOk(held.closed || late.closed || held.ended, 'the connections look alive')
  t.equal(echo.sockets.size, 1)
  t.match(proxy.stats(), { accepted: 2, refused: 0, open: 2, bytesToTarget: 'before'.length, bytesFromTarget: 'before'.length })

  proxy.restore()
  t.equal(proxy.state, 'forwarding')
  await waitFor('the blackholed clients to close', () => held.closed && late.closed)
  await waitFor('the target side to close', () => echo.sockets.size === 0)
  await sleep(QUIET_MS)
  t.equal(echo.received, 'before'.length, 'what was sent into the blackhole never arrives')
  t.equal(held.received.toString(), 'before')
  t.equal(proxy.stats().open, 0)

  const after = await Peer.open(t, proxy.port)
  await after.roundTrip('after')
  t.equal(echo.received, 'before'.length + 'after'.length)
})

t.test('close destroys everything, stops listening, and may be called twice', CASE, async (t) => {
  const echo = await startEcho(t)
  const proxy = await startProxy(t, echo)
  const peer = await Peer.open(t, proxy.port)
  await peer.roundTrip('bye')
  proxy.blackhole()

  await proxy.close()
  t.equal(proxy.state, 'closed')
  await waitFor('the client to close', () => peer.closed)
  await waitFor('the target side to close', () => echo.sockets.size === 0)
  await proxy.close()

  // After close the proxy stays closed: a late restore in some teardown must not revive it.
  proxy.restore()
  proxy.cut()
  t.equal(proxy.state, 'closed')
  const late = await Peer.open(t, proxy.port)
  t.equal(late.error?.code, 'ECONNREFUSED')
})

t.test('a reset asked for while the socket is sending its own FIN still closes it', CASE, async (t) => {
  // The race a cut or close can meet: the other side half-closed a moment ago, so the proxy has called end()
  // on this one and the shutdown is still queued. libuv refuses a reset then; a socket left to that refusal
  // never closes and keeps the test process from exiting.
  const echo = await startEcho(t)
  const socket = net.connect({ host: '127.0.0.1', port: echo.port, allowHalfOpen: true })
  socket.on('error', () => {})
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
  let closed = false
  socket.once('close', () => (closed = true))
  socket.end()
  t.ok(socket.writableEnded && !socket.writableFinished, 'the FIN is queued, not yet sent')
  closeSocket(socket, 'reset')
  await waitFor('the socket to close', () => closed)
  t.ok(closed, 'the socket closed')
  await waitFor('the target side to close', () => echo.sockets.size === 0)
})

t.test('a target that refuses connections closes the client side too', CASE, async (t) => {
  // A port that was just in use and is now closed: the nearest thing to a database that is down.
  const gone = net.createServer()
  await new Promise<void>((resolve) => gone.listen({ host: '127.0.0.1', port: 0 }, resolve))
  const address = gone.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  await new Promise<void>((resolve) => gone.close(() => resolve()))
  const down = await startTcpProxy({ targetPort: address.port })
  t.teardown(() => down.close())

  const peer = await Peer.open(t, down.port)
  await waitFor('the client to close', () => peer.closed)
  t.equal(peer.received.length, 0)
  t.match(down.stats(), { accepted: 1, refused: 0, open: 0, bytesFromTarget: 0 })
})

t.test('only forwards to loopback', async (t) => {
  await t.rejects(startTcpProxy({ targetHost: '10.0.0.1', targetPort: 5432 }), /loopback/)
  await t.rejects(startTcpProxy({ targetHost: 'db.example.com', targetPort: 5432 }), /loopback/)
  await t.rejects(startTcpProxy({ targetHost: '0.0.0.0', targetPort: 5432 }), /loopback/)
  const proxies = await Promise.all(['localhost', '[::1]', '127.0.0.2'].map((targetHost) => startTcpProxy({ targetHost, targetPort: 5432 })))
  t.teardown(() => Promise.all(proxies.map((proxy) => proxy.close())))
  t.equal(proxies.length, 3, 'loopback names and addresses are accepted')
  await t.rejects(startTcpProxy({ targetHost: '127.0.0.1', targetPort: 0 }), /port/)
})

t.test('url() points a database URL at the proxy and keeps the rest', async (t) => {
  const proxy = await startTcpProxy({ targetHost: '127.0.0.1', targetPort: 5432 })
  t.teardown(() => proxy.close())
  const original = 'postgres://aps_dev:s%40cret@127.0.0.1:5432/aps_dev?options=-c%20search_path%3Dtest_abc&sslmode=disable'
  const rewritten = new URL(proxy.url(original))
  const before = new URL(original)
  t.equal(rewritten.host, `127.0.0.1:${proxy.port}`)
  t.equal(rewritten.protocol, 'postgres:')
  t.equal(rewritten.username, before.username)
  t.equal(rewritten.password, before.password)
  t.equal(rewritten.pathname, '/aps_dev')
  t.same([...rewritten.searchParams], [...before.searchParams])
  t.equal(rewritten.searchParams.get('options'), '-c search_path=test_abc')
  t.equal(new URL(proxy.url('postgres://u@localhost/db')).port, String(proxy.port), 'the default port counts as 5432')
  t.throws(() => proxy.url('postgres://u@127.0.0.1:5433/db'), /5432/)
})

t.test(
  'a pg client through the proxy fails its next query once cut, and works again after restore',
  { skip: postgresUrl === undefined ? 'needs DATABASE_URL=postgres://…' : false, timeout: 10000 },
  async (t) => {
    if (postgresUrl === undefined) return
    const target = new URL(postgresUrl)
    const proxy = await startTcpProxy({ targetHost: target.hostname, targetPort: target.port === '' ? 5432 : Number(target.port) })
    t.teardown(() => proxy.close())
    const connectionString = proxy.url(postgresUrl)

    const client = async (): Promise<{ client: pg.Client; errors: Error[] }> => {
      const c = new pg.Client({ connectionString, connectionTimeoutMillis: 3000 })
      const errors: Error[] = []
      // A real caller listens: an idle client whose connection dies emits 'error'.
      c.on('error', (error) => errors.push(error))
      t.teardown(() => Promise.race([c.end().catch(() => {}), sleep(1000)]))
      await c.connect()
      return { client: c, errors }
    }
    /** The query's error, or a note that it hung or succeeded: a hang must not pass as the failure under test. */
    const outcome = (c: pg.Client): Promise<Error | string> =>
      Promise.race([
        c.query('SELECT 1').then(
          () => 'succeeded',
          (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
        ),
        sleep(3000).then(() => 'hung'),
      ])

    for (const mode of ['reset', 'end'] as const) {
      const { client: c, errors } = await client()
      const { rows } = await c.query<{ one: number }>('SELECT 1 AS one')
      t.same(rows, [{ one: 1 }], `${mode}: a query through the proxy works`)

      proxy.cut(mode)
      const failed = await outcome(c)
      t.type(failed, Error, `${mode}: the next query fails`)
      t.match(String(failed), /ECONNRESET|terminated|not queryable/, `${mode}: with a connection error`)
      t.ok(errors.length > 0, `${mode}: the client also emits 'error', which would crash a caller without a listener`)

      await t.rejects(client(), `${mode}: a new connection is refused during the cut`)
      proxy.restore()
      const { client: fresh } = await client()
      t.same((await fresh.query<{ one: number }>('SELECT 1 AS one')).rows, [{ one: 1 }], `${mode}: works again after restore`)
      await fresh.end()
    }
  },
)
