/**
 * What reaches the service before any route runs, and the headers of every
 * answer: a path the router cannot read, a request Node's parser refuses, a
 * known path asked with another method, security headers (with /docs still
 * loading under its CSP), request ids a client may not choose, and the
 * Bearer scheme in any case. Every case on both databases.
 */
import { connect, type Socket } from 'node:net'
import type { FastifyBaseLogger, LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/fastifyOptions.js'
import { buildTestApp } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('HTTP transport')

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
/** What a framework's own error body would show. */
const FRAMEWORK = /FST_|fastify|Bad Request|statusCode|"error"|"message"/i

function expectEnvelope(t: Test, res: LightMyRequestResponse, status: number, code: string): void {
  t.equal(res.statusCode, status, `status ${status}: ${res.body}`)
  t.equal((res.json() as { response_code?: string }).response_code, code, `response_code ${code}`)
  t.same(errorShapeProblems(res), [], 'the error envelope')
  t.notMatch(res.body, FRAMEWORK, 'nothing of the framework')
  t.equal(res.headers['x-content-type-options'], 'nosniff', 'nosniff')
}

interface RawAnswer {
  status: number
  headers: Record<string, string>
  body: string
  /** Bytes after the body the Content-Length announced: there must be none. */
  extra: number
  /** The server closed the connection. */
  closed: boolean
}

/** Parses one HTTP/1.1 answer read off a socket. */
function parseAnswer(raw: string, closed: boolean): RawAnswer {
  const end = raw.indexOf('\r\n\r\n')
  if (end < 0) throw new Error(`no complete head in ${JSON.stringify(raw.slice(0, 200))}`)
  const [statusLine = '', ...lines] = raw.slice(0, end).split('\r\n')
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1] ?? NaN)
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  const rest = Buffer.from(raw.slice(end + 4))
  const length = Number(headers['content-length'])
  return { status, headers, body: rest.subarray(0, length).toString(), extra: rest.length - length, closed }
}

/** Writes `chunks` on a fresh connection (keeping on writing `trailing` bytes a while, as a client still sending would) and reads until the server closes. */
function exchange(port: number, chunks: string[], trailing = 0): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let received = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (received += chunk))
    socket.on('error', () => undefined)
    socket.on('end', () => socket.end())
    socket.on('close', () => {
      try {
        resolve(parseAnswer(received, true))
      } catch (error) {
        reject(error as Error)
      }
    })
    for (const chunk of chunks) socket.write(chunk)
    let sent = 0
    const more = setInterval(() => {
      if (sent >= trailing || socket.destroyed || !socket.writable) return clearInterval(more)
      socket.write('x'.repeat(64 * 1024))
      sent += 64 * 1024
    }, 5)
    setTimeout(() => {
      clearInterval(more)
      socket.destroy()
    }, 5000).unref()
  })
}

/** Reads answers off a kept-open connection: resolves with the first complete one. */
function nextAnswer(socket: Socket): Promise<RawAnswer> {
  return new Promise((resolve) => {
    let received = ''
    const onData = (chunk: Buffer) => {
      received += chunk.toString()
      const end = received.indexOf('\r\n\r\n')
      if (end < 0) return
      const length = Number(/content-length: (\d+)/i.exec(received.slice(0, end))?.[1] ?? 0)
      if (Buffer.byteLength(received.slice(end + 4)) < length) return
      socket.off('data', onData)
      resolve(parseAnswer(received, false))
    }
    socket.on('data', onData)
  })
}

function expectRawEnvelope(t: Test, answer: RawAnswer, status: number, text = 'The request cannot be processed.'): void {
  t.equal(answer.status, status, `status ${status}`)
  t.match(answer.headers['content-type'], /^application\/json/, 'JSON')
  t.equal(answer.extra, 0, 'Content-Length is the body length')
  t.equal(answer.headers.connection, 'close', 'Connection: close')
  t.ok(answer.closed, 'and the server closes it')
  t.equal(answer.headers['x-content-type-options'], 'nosniff')
  t.match(answer.headers['x-request-id'], UUID, 'a request id of our own')
  t.same(JSON.parse(answer.body), { response_code: '604', response_text: text }, 'the envelope, code 604')
}

t.test('transport', async (t) => {
  const ta = await buildTestApp(t)
  const token = ta.rootToken

  t.test('a path the router cannot read, or a parameter too long: 400 / 414 604, localised, nothing echoed', async (t) => {
    const bad = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog%' })
    expectEnvelope(t, bad, 400, '604')
    t.equal(bad.json().response_text, 'The request cannot be processed.')
    t.notMatch(bad.body, /catalog/, 'the path is not echoed')
    t.match(bad.headers['x-request-id'], UUID)

    const es = await ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog%zz?lang=es' })
    expectEnvelope(t, es, 400, '604')
    t.equal(es.json().response_text, 'No se puede procesar la solicitud.', 'in the language asked for')
    const header = await ta.call({ method: 'POST', url: '/v2/admin/%E0%A4%A', headers: { 'accept-language': 'es' }, body: {} })
    expectEnvelope(t, header, 400, '604')
    t.equal(header.json().response_text, 'No se puede procesar la solicitud.', 'or named by Accept-Language')

    const long = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${'a'.repeat(150)}` })
    expectEnvelope(t, long, 414, '604')
    t.notMatch(long.body, /aaaa/, 'the parameter is not echoed')
  })

  t.test('a known path with another method: 405 603 with Allow; OPTIONS and unknown paths stay 404', async (t) => {
    const userId = ta.root.id
    const cases: Array<[string, string, string, string?]> = [
      ['POST', '/v2/profile', 'GET, HEAD'],
      ['DELETE', '/v2/authz/check?obj=orders&act=read', 'GET, HEAD'],
      ['GET', '/v2/authz/check-batch', 'POST'],
      ['GET', '/v2/auth/login', 'POST'],
      ['PUT', '/v2/admin/permissions/roles/clerk/grant', 'POST'],
      ['GET', `/v2/admin/permissions/users/${userId}/deny`, 'POST'],
      ['POST', `/v2/admin/permissions/users/${userId}`, 'GET, HEAD'],
      ['PATCH', '/healthz', 'GET, HEAD'],
      ['DELETE', '/docs/json', 'GET, HEAD'],
      ['POST', '/docs/static/swagger-ui.css', 'GET, HEAD'],
    ]
    for (const [method, url, allow] of cases) {
      const res = await ta.app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${token}` } })
      expectEnvelope(t, res, 405, '603')
      t.equal(res.headers.allow, allow, `${method} ${url}: Allow ${allow}`)
    }
    const anonymous = await ta.call({ method: 'POST', url: '/v2/profile', token: null })
    expectEnvelope(t, anonymous, 405, '603')
    const es = await ta.call({ method: 'POST', url: '/v2/profile?lang=es' })
    t.equal(es.json().response_text, 'Este método no está permitido aquí.', 'localised')

    const head = await ta.app.inject({ method: 'HEAD', url: '/v2/profile', headers: { authorization: `Bearer ${token}` } })
    t.equal(head.statusCode, 200, 'HEAD is answered wherever GET is')
    const options = await ta.app.inject({ method: 'OPTIONS', url: '/v2/profile' })
    expectEnvelope(t, options, 404, '400')
    t.notOk(options.headers.allow, 'OPTIONS answers as before')
    for (const url of ['/v2/profilex', '/v2/profile/extra', '/docs/static/missing.js']) {
      const res = await ta.call({ method: 'GET', url })
      expectEnvelope(t, res, 404, '400')
      t.notOk(res.headers.allow, `${url}: no Allow`)
    }
    expectEnvelope(t, await ta.call({ method: 'POST', url: '/v2/nothing' }), 404, '400')

    // Cross-origin support answers OPTIONS on every path: that must not turn every unknown path into a 405.
    const fastify = createFastify(ta.service.config)
    await fastify.register(app, { service: ta.service })
    await fastify.register(async (cors) => {
      cors.options('*', { config: { public: true } }, (_request, reply) => reply.code(204).send())
    })
    await fastify.ready()
    t.teardown(() => fastify.close())
    expectEnvelope(t, await fastify.inject({ method: 'GET', url: '/v2/nothing' }), 404, '400')
    const withCors = await fastify.inject({ method: 'POST', url: '/v2/profile' })
    expectEnvelope(t, withCors, 405, '603')
    t.equal(withCors.headers.allow, 'GET, HEAD', 'OPTIONS answered for every path is not listed')
  })

  t.test('what the HTTP parser refuses: a complete HTTP/1.1 envelope, then the connection closes', async (t) => {
    const listening = await buildTestApp(t, { service: ta.service })
    await listening.app.listen({ port: 0, host: '127.0.0.1' })
    const address = listening.app.server.address()
    const port = typeof address === 'object' && address !== null ? address.port : 0

    expectRawEnvelope(t, await exchange(port, ['BLAH\r\n\r\n']), 400)
    expectRawEnvelope(t, await exchange(port, ['GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n']), 400)
    expectRawEnvelope(t, await exchange(port, ['GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n']), 400)
    expectRawEnvelope(t, await exchange(port, ['GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n']), 400)

    const big = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`
    expectRawEnvelope(t, await exchange(port, [big]), 431)
    // A client still sending its headers when refused gets the answer, not a reset.
    expectRawEnvelope(t, await exchange(port, [`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}`], 512 * 1024), 431)

    // On a connection that has already been answered once.
    const socket = connect(port, '127.0.0.1')
    t.teardown(() => socket.destroy())
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
    const first = await nextAnswer(socket)
    t.equal(first.status, 200, 'a first request is answered')
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.on('end', () => socket.end())
    socket.write(big)
    const refusal = await nextAnswer(socket)
    await closed
    expectRawEnvelope(t, { ...refusal, closed: true }, 431)
    t.equal(refusal.headers['x-request-id']?.slice(0, 24), first.headers['x-request-id']?.slice(0, 24), 'its id drawn as a route answer\'s is')

    // A request that took too long to arrive (Node's own timers take seconds to fire; the event is what they raise).
    const timedOut = new Promise<RawAnswer>((resolve) => {
      listening.app.server.once('connection', (serverSide: Socket) => {
        setImmediate(() =>
          listening.app.server.emit('clientError', Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), serverSide),
        )
      })
      void exchange(port, ['GET /healthz HTTP/1.1\r\n']).then(resolve)
    })
    expectRawEnvelope(t, await timedOut, 408)

    const after = await fetch(`http://127.0.0.1:${port}/healthz`)
    t.equal(after.status, 200, 'the server goes on serving')
  })

  t.test('security headers: nosniff on every answer, helmet on the admin API and /docs, the check routes kept minimal', async (t) => {
    const answers: Array<[string, LightMyRequestResponse]> = [
      ['check', await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read' })],
      ['check-batch', await ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: { command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }] } } })],
      ['a refused check', await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders' })],
      ['profile', await ta.call({ method: 'GET', url: '/v2/profile' })],
      ['no token', await ta.call({ method: 'GET', url: '/v2/profile', token: null })],
      ['login', await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: 'x@y.example', password: 'wrong-password' } } })],
      ['health', await ta.call({ method: 'GET', url: '/healthz', token: null })],
      ['404', await ta.call({ method: 'GET', url: '/nothing' })],
      ['405', await ta.call({ method: 'PUT', url: '/v2/profile' })],
      ['bad URL', await ta.call({ method: 'GET', url: '/%' })],
      ['docs', await ta.app.inject({ method: 'GET', url: '/docs' })],
    ]
    for (const [name, res] of answers) t.equal(res.headers['x-content-type-options'], 'nosniff', `${name}: nosniff`)

    const helmetHeaders = ['content-security-policy', 'x-frame-options', 'strict-transport-security', 'referrer-policy', 'cross-origin-resource-policy']
    for (const [name, res] of answers.filter(([n]) => ['profile', 'no token', 'login', 'docs'].includes(n))) {
      for (const header of helmetHeaders) t.ok(res.headers[header], `${name}: ${header}`)
    }
    for (const [name, res] of answers.filter(([n]) => n.includes('check'))) {
      for (const header of helmetHeaders) t.notOk(res.headers[header], `${name}: no ${header} (the gateway's hot path)`)
    }
  })

  t.test('/docs and every asset its page loads are served, and its CSP allows them', async (t) => {
    const page = await ta.app.inject({ method: 'GET', url: '/docs' })
    t.equal(page.statusCode, 200)
    t.match(page.headers['content-type'], /^text\/html/)
    const csp = new Map(
      String(page.headers['content-security-policy'])
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .filter((parts) => parts[0] !== '')
        .map(([name = '', ...values]) => [name, values]),
    )
    const allows = (directive: string, source: string) => (csp.get(directive) ?? csp.get('default-src') ?? []).includes(source)
    t.ok(allows('script-src', "'self'"), 'scripts from the service')
    t.ok(allows('style-src', "'self'"), 'styles from the service')
    t.ok(allows('img-src', "'self'") && allows('img-src', 'data:'), 'images from the service and data: (the stylesheet draws its icons with them)')
    t.ok(allows('connect-src', "'self'"), 'the page fetches the OpenAPI document from the service')
    t.notOk(csp.has('upgrade-insecure-requests'), 'assets are not moved to https (the docs also work over plain HTTP)')

    t.notMatch(page.body, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script (script-src has no unsafe-inline)')
    t.notMatch(page.body, /\son[a-z]+=/i, 'no inline event handler (script-src-attr none)')
    const assets = [...page.body.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map((m) => m[1] ?? '')
    t.ok(assets.length >= 5, `the page loads ${assets.length} assets`)
    const base = 'http://service.example/docs'
    for (const asset of [...assets, '/docs/json']) {
      const url = new URL(asset, base)
      t.equal(url.origin, 'http://service.example', `${asset}: same origin, so 'self' covers it`)
      const res = await ta.app.inject({ method: 'GET', url: url.pathname })
      t.equal(res.statusCode, 200, `${url.pathname}: 200`)
    }
    const css = await ta.app.inject({ method: 'GET', url: '/docs/static/swagger-ui.css' })
    const cssUrls = [...css.body.matchAll(/url\(\s*["']?([^"')]+)/g)].map((m) => m[1] ?? '')
    t.same(
      cssUrls.filter((u) => !u.startsWith('data:')),
      [],
      'every image in the stylesheet is a data: URL, which img-src allows',
    )
    const initializer = await ta.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' })
    t.equal(initializer.statusCode, 200)
    t.match(initializer.body, /resolveUrl\('\.\/json'\)/, 'the UI asks for the document the service serves at /docs/json')
  })

  t.test('request ids: ours always; a short safe token from the client is logged beside it and echoed', async (t) => {
    const { service } = ta
    const fastify = createFastify(service.config)
    // The bindings every log line of a request carries (Fastify's logger is pino's, which has bindings()).
    fastify.get('/test/log-bindings', { config: { public: true } }, (request, reply) => {
      void reply.send((request.log as FastifyBaseLogger & { bindings(): Record<string, unknown> }).bindings())
    })
    await fastify.register(app, { service })
    await fastify.ready()
    t.teardown(() => fastify.close())
    const bindings = async (id?: string) => {
      const res = await fastify.inject({ method: 'GET', url: '/test/log-bindings', headers: id !== undefined ? { 'x-request-id': id } : {} })
      return { echoed: res.headers['x-request-id'], logged: res.json() as { reqId?: string; client_request_id?: string } }
    }

    const none = await bindings()
    t.match(none.logged.reqId, UUID, 'our id is logged')
    t.notOk('client_request_id' in none.logged)
    t.equal(none.echoed, none.logged.reqId, 'and echoed')

    for (const id of ['gw-1', 'trace.me_123:abc-DEF', 'a'.repeat(64), '0af7651916cd43dd8448eb211c80319c']) {
      const sent = await bindings(id)
      t.match(sent.logged.reqId, UUID, `${id}: our id is still the request id`)
      t.equal(sent.logged.client_request_id, id, `${id}: theirs is logged beside it`)
      t.equal(sent.echoed, id, `${id}: and echoed, so the client can match the answer`)
    }
    for (const id of ['', 'a'.repeat(65), 'has space', 'quote"d', '<script>', 'semi;colon', 'slash/ed', 'ñandú', 'a,b']) {
      const sent = await bindings(id)
      t.match(sent.logged.reqId, UUID, `${JSON.stringify(id).slice(0, 20)}: our id`)
      t.notOk('client_request_id' in sent.logged, `${JSON.stringify(id).slice(0, 20)}: ignored`)
      t.equal(sent.echoed, sent.logged.reqId, `${JSON.stringify(id).slice(0, 20)}: ours is echoed`)
    }

    const check = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read', headers: { 'x-request-id': 'gw-check-1' } })
    t.equal(check.headers['x-request-id'], 'gw-check-1', 'the check route echoes it too')
    const bad = await ta.call({ method: 'GET', url: '/%', headers: { 'x-request-id': 'gw-bad-url' } })
    t.equal(bad.headers['x-request-id'], 'gw-bad-url', 'and so does the bad-URL answer')
    const refused = await ta.call({ method: 'GET', url: '/%', headers: { 'x-request-id': 'bad id' } })
    t.match(refused.headers['x-request-id'], UUID)
  })

  t.test('the Bearer scheme in any case', async (t) => {
    const profile = (authorization: string) => ta.call({ method: 'GET', url: '/v2/profile', token: null, headers: { authorization } })
    const check = (authorization: string) =>
      ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read', token: null, headers: { authorization } })
    for (const scheme of ['bearer', 'BEARER', 'Bearer', 'bEaReR']) {
      // Twice: the first verifies the token, the second is answered from the verified-token cache.
      for (const round of ['first', 'cached']) {
        const res = await profile(`${scheme} ${token}`)
        t.equal(res.statusCode, 200, `${scheme} (${round})`)
        t.equal(res.json().data.id, ta.root.id)
        t.equal((await check(`${scheme} ${token}`)).statusCode, 200, `${scheme} on the check route (${round})`)
      }
    }
    for (const authorization of [`Bearer${token}`, `Bearerx ${token}`, `Basic ${token}`, `bearer: ${token}`, 'bearer ', 'BEARER not.a.token']) {
      const res = await profile(authorization)
      expectEnvelope(t, res, 401, '201')
    }
  })
})
