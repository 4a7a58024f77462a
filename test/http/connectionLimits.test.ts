/**
 * What one client may hold of the server, over real sockets: a request
 * trickled in a byte at a time is answered 408 `604` once REQUEST_TIMEOUT_MS
 * has passed; connections past MAX_CONNECTIONS_PER_ADDRESS from one address
 * are closed while other addresses (and, by default, the loopback) are
 * served; an early answer to a body still being sent (413, 415) is read
 * whole by the client, never replaced by a reset.
 */
import { connect, type Server, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { ConfigError } from '../../src/config.js'
import { addressListMatcher } from '../../src/domain/clientIp.js'
import { loadConfig } from '../../src/startup.js'
import { buildTestApp, testConfig } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('connection caps and request timeouts')

/** Everything read off a connection until it closed, and how it ended. */
interface Outcome {
  received: string
  /** The socket error the client saw (EPIPE, ECONNRESET, ...), if any. */
  error: string | undefined
}

interface RawAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

function parseAnswer(raw: string): RawAnswer | null {
  const end = raw.indexOf('\r\n\r\n')
  if (end < 0) return null
  const [statusLine = '', ...lines] = raw.slice(0, end).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  const body = Buffer.from(raw.slice(end + 4)).subarray(0, Number(headers['content-length'] ?? 0)).toString()
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1] ?? NaN), headers, body }
}

/** Resolves when `socket` closes, with what it read; a bounded wait: past `limitMs` the client gives up and says so. */
function untilClosed(socket: Socket, limitMs: number, closeOnEnd = true): Promise<Outcome & { timedOut: boolean }> {
  return new Promise((resolve) => {
    let received = ''
    let error: string | undefined
    let timedOut = false
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()))
    socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message))
    // Once the answer is in, the client closes its side too, as HTTP clients do after `Connection: close`.
    if (closeOnEnd) socket.on('end', () => socket.end())
    const limit = setTimeout(() => {
      timedOut = true
      socket.destroy()
    }, limitMs)
    socket.once('close', () => {
      clearTimeout(limit)
      resolve({ received, error, timedOut })
    })
  })
}

function portOf(address: ReturnType<Server['address']>): number {
  return typeof address === 'object' && address !== null ? address.port : 0
}

/** One GET /healthz on an open keep-alive connection; the answer's status, or null when the connection closed instead. */
function healthOn(socket: Socket): Promise<number | null> {
  return new Promise((resolve) => {
    let received = ''
    const onData = (chunk: Buffer) => {
      received += chunk.toString()
      const answer = parseAnswer(received)
      if (answer !== null && Buffer.byteLength(received.slice(received.indexOf('\r\n\r\n') + 4)) >= Number(answer.headers['content-length'] ?? 0)) {
        done(answer.status)
      }
    }
    const onClose = () => done(null)
    const done = (status: number | null) => {
      socket.off('data', onData)
      socket.off('close', onClose)
      resolve(status)
    }
    socket.on('data', onData)
    socket.once('close', onClose)
    socket.on('error', () => undefined)
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  })
}

/** A connection from `localAddress` (the loopback has a whole /8 to choose from), once it is established or closed. */
function open(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress })
    socket.on('error', () => undefined)
    socket.once('connect', () => resolve(socket))
    socket.once('close', () => resolve(socket))
  })
}

async function listening(t: Test, env: Record<string, string>) {
  const ta = await buildTestApp(t, { env })
  await ta.app.listen({ port: 0, host: '127.0.0.1' })
  return { ta, port: portOf(ta.app.server.address()) }
}

t.test('a request trickled a byte at a time: 408 604 once REQUEST_TIMEOUT_MS has passed, then the connection closes', async (t) => {
  const { port } = await listening(t, { REQUEST_TIMEOUT_MS: '600' })
  const body = JSON.stringify({ command: 'login', data: { email: 'root@example.com', password: 'root-password-123' } })
  const socket = connect(port, '127.0.0.1')
  const closed = untilClosed(socket, 15_000)
  socket.write(`POST /v2/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
  let sent = 0
  const trickle = setInterval(() => {
    if (sent < body.length && socket.writable) socket.write(body[sent++] ?? '')
  }, 100)
  const outcome = await closed
  clearInterval(trickle)
  t.notOk(outcome.timedOut, 'the server closed the connection (a client waits up to 15 s)')
  t.ok(sent < body.length, `before the body was complete (${sent} of ${body.length} bytes sent)`)
  const answer = parseAnswer(outcome.received)
  t.equal(answer?.status, 408, '408')
  t.same(JSON.parse(answer?.body ?? '{}'), { response_code: '604', response_text: 'The request cannot be processed.' })
  t.equal(answer?.headers.connection, 'close')

  // Headers trickled in alone are cut off the same way.
  const slow = connect(port, '127.0.0.1')
  const slowClosed = untilClosed(slow, 15_000)
  const head = 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: '
  let written = 0
  const drip = setInterval(() => {
    if (slow.writable) slow.write(written < head.length ? (head[written++] ?? '') : 'a')
  }, 50)
  const cut = await slowClosed
  clearInterval(drip)
  t.notOk(cut.timedOut, 'slow headers: closed')
  t.equal(parseAnswer(cut.received)?.status, 408, 'slow headers: 408')

  const fine = await fetch(`http://127.0.0.1:${port}/v2/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  t.equal(fine.status, 200, 'a request that arrives in time is served')
})

t.test('connections past MAX_CONNECTIONS_PER_ADDRESS from one address are closed; other addresses are served', async (t) => {
  const { port } = await listening(t, { MAX_CONNECTIONS_PER_ADDRESS: '3', CONNECTION_LIMIT_EXEMPT: 'none' })
  const held = await Promise.all([open(port), open(port), open(port)])
  t.teardown(() => held.forEach((s) => s.destroy()))
  for (const socket of held) t.equal(await healthOn(socket), 200, 'a connection within the cap is served')

  const over = await open(port)
  t.equal(await healthOn(over), null, 'the fourth from 127.0.0.1 is closed unanswered')
  const other = await open(port, '127.0.0.2')
  t.teardown(() => other.destroy())
  t.equal(await healthOn(other), 200, 'another address is served meanwhile')
  t.equal(await healthOn(held[0] as Socket), 200, 'and so are the connections already held, again')

  // Once one closes, the address may open another (the server sees the close a moment later: bounded retries).
  ;(held.pop() as Socket).destroy()
  let status: number | null = null
  for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
    await sleep(20)
    const again = await open(port)
    status = await healthOn(again)
    if (status === 200) held.push(again)
    else again.destroy()
  }
  t.equal(status, 200, 'a connection closed frees its place')
})

t.test('by default the loopback is not counted: a sidecar gateway keeps its keep-alive pool', async (t) => {
  const { port } = await listening(t, { MAX_CONNECTIONS_PER_ADDRESS: '2' })
  const pool = await Promise.all(Array.from({ length: 8 }, () => open(port)))
  t.teardown(() => pool.forEach((s) => s.destroy()))
  const statuses = await Promise.all(pool.map(healthOn))
  t.same(statuses, Array.from({ length: 8 }, () => 200), '8 connections from 127.0.0.1 with a cap of 2')
})

/** Sends a 5 MiB body as fast as the socket takes it and reads whatever comes back. */
async function sendLargeBody(port: number, head: string): Promise<Outcome> {
  const socket = connect(port, '127.0.0.1')
  // A client that sends its whole body before it reads (as curl does), then closes its side.
  const closed = untilClosed(socket, 30_000, false)
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  const total = 5 * 1024 * 1024
  socket.write(`${head}Content-Length: ${total}\r\n\r\n`)
  for (let sent = 0; sent < total && !socket.destroyed; sent += chunk.length) {
    if (!socket.write(chunk)) await new Promise((resolve) => socket.once('drain', resolve).once('close', resolve))
  }
  if (!socket.destroyed) socket.end()
  const { received, error } = await closed
  return { received, error }
}

t.test('an early answer to a body still being sent is read whole, not reset (lingering close)', async (t) => {
  const { port } = await listening(t, {})
  const heads: Record<413 | 415, string> = {
    413: 'POST /v2/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n',
    415: 'POST /v2/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n',
  }
  const codes: Record<413 | 415, string> = { 413: '600', 415: '601' }
  for (let round = 0; round < 3; round++) {
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) => {
        const status: 413 | 415 = i % 4 === 3 ? 415 : 413
        return sendLargeBody(port, heads[status]).then((outcome) => ({ status, outcome }))
      }),
    )
    for (const { status, outcome } of outcomes) {
      t.equal(outcome.error, undefined, `round ${round}, ${status}: no socket error on the client (${outcome.error ?? ""})`)
      const answer = parseAnswer(outcome.received)
      t.equal(answer?.status, status, `round ${round}: the whole ${status} answer`)
      t.equal((JSON.parse(answer?.body ?? '{}') as { response_code?: string }).response_code, codes[status])
    }
  }
})

t.test('REQUEST_TIMEOUT_MS, MAX_CONNECTIONS_PER_ADDRESS and CONNECTION_LIMIT_EXEMPT', async (t) => {
  const defaults = testConfig().connections
  t.equal(defaults.requestTimeoutMs, 30_000, 'a request must arrive within 30 s by default')
  t.equal(defaults.maxPerAddress, 256, '256 connections per address by default')
  t.same(defaults.exempt, ['loopback'], 'the loopback is exempt by default')
  const exempt = (value: string) => testConfig({ CONNECTION_LIMIT_EXEMPT: value }).connections.exempt
  t.same(exempt('none'), [])
  t.same(exempt('10.0.0.0/8, fd00::/8,192.0.2.7'), ['10.0.0.0/8', 'fd00::/8', '192.0.2.7'])
  t.same(exempt('loopback, linklocal,uniquelocal'), ['loopback', 'linklocal', 'uniquelocal'], "proxy-addr's names, as TRUST_PROXY reads its list")
  const matches = addressListMatcher(exempt('loopback,10.0.0.0/8'))
  t.same(['127.0.0.1', '::1', '::ffff:127.0.0.1', '10.9.8.7', '192.0.2.1'].map(matches), [true, true, true, true, false], 'and matched as proxy-addr matches')
  for (const bad of ['10.0.0.0/33', 'example.com', '10.0.0.0/8/1', '::1/129', '10.0.0.0/x', 'loopback,']) {
    t.throws(() => testConfig({ CONNECTION_LIMIT_EXEMPT: bad }), ConfigError, `${bad} is refused`)
  }
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', REQUEST_TIMEOUT_MS: '0' }), ConfigError, 'a request timeout of 0 is refused')
  t.equal(testConfig({ MAX_CONNECTIONS_PER_ADDRESS: '0' }).connections.maxPerAddress, 0, '0 turns the cap off')
})
