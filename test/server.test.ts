import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { openPostgres } from '../src/storage/pg.js'
import { postgresUrl } from './helper.js'
import { pgliteRunOnly } from './support/onceOnPGlite.js'
import { COMPILE_CACHE_ENV, TEST_NODE_ARGS } from './support/nodeArgs.js'

/** The real runner in its own process: start-up and the first admin, HTTP over a socket, logs, and SIGTERM finishing in-flight requests before exit 0. */

const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))
const SECRET = 'server-test-secret-0123456789abcdef'
const BOOT_EMAIL = 'boot@example.com'
const BOOT_PASSWORD = `boot-${randomBytes(6).toString('hex')}`
const REGISTERED_PASSWORD = `reg-${randomBytes(6).toString('hex')}`
const WRONG_PASSWORD = `wrong-${randomBytes(6).toString('hex')}`

interface Teardown {
  teardown(fn: () => unknown): void
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

interface Running {
  child: ChildProcess
  base: string
  port: number
  output: () => string
  exited: Promise<number | null>
}

/**
 * `node --import tsx src/http/server.ts` with `env` and nothing else from this process but PATH, the compile cache and the tests'
 * initdb for an embedded store (test/helper.ts; `APS_TEST_PGLITE_INITDB: ''` in `env` makes the process run its own).
 */
async function startServer(t: Teardown, env: Record<string, string>): Promise<Running> {
  const port = await freePort()
  const child = spawn(process.execPath, [...TEST_NODE_ARGS, 'src/http/server.ts'], {
    cwd: repositoryRoot,
    env: { PATH: process.env.PATH ?? '', APS_TEST_PGLITE_INITDB: process.env.APS_TEST_PGLITE_INITDB ?? '', HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', ...COMPILE_CACHE_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}:\n${output}`)
    try {
      if ((await fetch(`${base}/healthz`)).ok) return { child, base, port, output: () => output, exited }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  child.kill('SIGKILL')
  throw new Error(`the server did not start:\n${output}`)
}

async function waitFor(condition: () => boolean, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!condition()) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  return true
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

const loginBody = (email: string, password: string) => ({ command: 'login', data: { email, password } })

/** The log as JSON lines (pino); anything else the process printed is kept as text. */
function logLines(output: string): Array<Record<string, unknown>> {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>
      } catch {
        return { text: line }
      }
    })
}

/** A database for the process: a fresh schema on PostgreSQL when the suite runs there, else an embedded store in a temporary folder. */
async function databaseFor(t: Teardown): Promise<string> {
  if (postgresUrl === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'aps-server-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    return `pglite://${dir}`
  }
  const schema = `server_${randomBytes(6).toString('hex')}`
  const admin = openPostgres({ url: postgresUrl, max: 1 })
  await admin.query(`CREATE SCHEMA ${schema}`)
  t.teardown(async () => {
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.close()
  })
  const url = new URL(postgresUrl)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return url.toString()
}

t.test('the real server: bootstrap, login over HTTP, request ids, redacted logs, graceful SIGTERM', async (t) => {
  const databaseUrl = await databaseFor(t)
  const server = await startServer(t, {
    DATABASE_URL: databaseUrl,
    JWT_SECRET: SECRET,
    BOOTSTRAP_ADMIN_EMAIL: BOOT_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: BOOT_PASSWORD,
  })

  const login = await post(`${server.base}/v2/auth/login`, loginBody(BOOT_EMAIL, BOOT_PASSWORD))
  t.equal(login.status, 200, 'the bootstrap admin logs in over real HTTP')
  const token = ((await login.json()) as { data: { access_token: string } }).data.access_token
  t.type(token, 'string')

  const profile = await fetch(`${server.base}/v2/profile`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'trace-me-123' } })
  t.equal(profile.status, 200)
  t.match(await profile.json(), { response_code: '001', data: { email: BOOT_EMAIL, sub_role_code: 'super_admin', principal_type: 'system_owner' } })
  t.equal(profile.headers.get('x-request-id'), 'trace-me-123', 'the request id is echoed')
  const generated = await fetch(`${server.base}/v2/profile`, { headers: { authorization: `Bearer ${token}` } })
  t.match(generated.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, 'and generated when not sent')

  const check = await fetch(`${server.base}/v2/authz/check?obj=orders&act=read`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'check-1' } })
  t.equal(check.status, 200, 'a gateway check')
  const badCheck = await fetch(`${server.base}/v2/authz/check?obj=orders`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'check-2' } })
  t.equal(badCheck.status, 400)

  const registered = await post(
    `${server.base}/v2/admin/register`,
    { command: 'register-admin', data: { email: 'ana@example.com', password: REGISTERED_PASSWORD, name: 'Ana', sub_role_code: 'support' } },
    { authorization: `Bearer ${token}` },
  )
  t.equal(registered.status, 201)
  const refused = await post(`${server.base}/v2/auth/login`, loginBody(BOOT_EMAIL, WRONG_PASSWORD))
  t.equal(refused.status, 401)
  const noToken = await fetch(`${server.base}/v2/profile`)
  t.equal(noToken.status, 401)
  const badJson = await fetch(`${server.base}/v2/admin/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: '{"command":',
  })
  t.equal(badJson.status, 400)
  t.notMatch(await badJson.text(), /\n\s+at |Error:/, 'no internals over the wire')

  // A request in flight when SIGTERM arrives: its headers are in, its body is not yet.
  const body = JSON.stringify(loginBody(BOOT_EMAIL, BOOT_PASSWORD))
  const cut = 20
  let response: IncomingMessage | null = null
  let responseBody = ''
  const inFlight = new Promise<void>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: server.port,
        method: 'POST',
        path: '/v2/auth/login',
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'x-request-id': 'in-flight-1' },
      },
      (res) => {
        response = res
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => (responseBody += chunk))
        res.on('end', () => resolve())
      },
    )
    req.on('error', reject)
    req.write(body.slice(0, cut))
    t.teardown(() => req.destroy())
    void waitFor(() => /"client_request_id":"in-flight-1"/.test(server.output())).then(async (arrived) => {
      t.ok(arrived, 'the server has the request')
      server.child.kill('SIGTERM')
      await new Promise((r) => setTimeout(r, 300))
      t.equal(server.child.exitCode, null, 'the process waits for the request in flight')
      req.end(body.slice(cut))
    })
  })
  await inFlight
  t.equal((response as IncomingMessage | null)?.statusCode, 200, 'the request in flight is answered')
  t.match(JSON.parse(responseBody), { response_code: '001', data: { token_type: 'Bearer' } })
  t.equal(await server.exited, 0, 'SIGTERM exits 0')
  const afterStop = await fetch(`${server.base}/healthz`).then(
    (r) => r.status,
    () => 'refused',
  )
  t.equal(afterStop, 'refused', 'nothing listens any more')

  const output = server.output()
  const lines = logLines(output)
  t.ok(lines.length > 5, 'the server logged')
  t.same(
    lines.filter((l) => 'text' in l),
    [],
    'every log line is JSON',
  )
  const requestLines = lines.filter((l) => 'req' in l || 'res' in l || 'responseTime' in l || 'response_code' in l)
  t.ok(requestLines.length >= 10, `${requestLines.length} request log lines`)
  t.same(
    requestLines.filter((l) => typeof l.reqId !== 'string' || l.reqId === ''),
    [],
    'every request log line carries a request id',
  )
  t.ok(
    lines.some((l) => l.client_request_id === 'trace-me-123' && typeof l.reqId === 'string' && 'res' in l),
    'the completed request is logged with the id the client sent beside ours',
  )
  t.ok(lines.some((l) => l.client_request_id === 'in-flight-1' && 'res' in l), 'the request in flight completed in the log')
  t.same(
    lines.filter((l) => l.client_request_id === 'check-1' || l.client_request_id === 'check-2'),
    [],
    'gateway checks are not logged one by one at the default CHECK_LOG_LEVEL',
  )
  t.ok(lines.some((l) => typeof l.msg === 'string' && /stopping/.test(l.msg)), 'the stop is logged')
  for (const [what, secret] of [
    ['the bootstrap password', BOOT_PASSWORD],
    ['a registered password', REGISTERED_PASSWORD],
    ['a wrong password', WRONG_PASSWORD],
    ['the bearer token', token],
    ["the token's signature", token.split('.')[2] ?? token],
    ['the JWT secret', SECRET],
  ] as const) {
    t.notOk(output.includes(secret), `the logs never contain ${what}`)
  }
})

t.test('the first-start password reaches stderr whatever LOG_LEVEL says', { skip: pgliteRunOnly('an embedded store in a folder of its own') }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'aps-first-quiet-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const quiet = await startServer(t, { DATABASE_URL: `pglite://${dir}`, LOG_LEVEL: 'error' })
  const line = quiet.output().split('\n').find((l) => l.startsWith('FIRST START: the system-owner super_admin admin@example.com was created with password '))
  t.ok(line !== undefined, 'printed on stderr with LOG_LEVEL=error')
  const password = line?.split(' ').pop() ?? ''
  const login = await post(`${quiet.base}/v2/auth/login`, loginBody('admin@example.com', password))
  t.equal(login.status, 200, 'and it logs in')
  quiet.child.kill('SIGTERM')
  t.equal(await quiet.exited, 0)
})

t.test('first start on an empty embedded store prints the first admin once', { skip: pgliteRunOnly('an embedded store in a folder of its own') }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'aps-first-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // Without the tests' initdb: the folder is initialised by this start, as on a user's first start.
  const env = { DATABASE_URL: `pglite://${dir}`, APS_TEST_PGLITE_INITDB: '' }

  const first = await startServer(t, env)
  const announced = logLines(first.output()).filter((l) => typeof l.msg === 'string' && l.msg.includes('admin@example.com'))
  t.equal(announced.length, 1, 'one log line announces the first admin')
  t.match(announced[0]?.msg, /FIRST START: created the system-owner super_admin admin@example\.com; its one-time password was printed on this process's stderr, not in this log/)
  const notice = first.output().split('\n').filter((line) => line.startsWith('FIRST START: the system-owner super_admin admin@example.com was created with password '))
  t.equal(notice.length, 1, 'one plain line on stderr gives the password')
  // The password is base64url and may begin with '-': take the whole last word.
  const password = notice[0]?.split(' ').pop() ?? ''
  t.ok(password.length >= 12, 'with its password')
  t.same(
    first.output().split('\n').filter((line) => line.includes(password)),
    notice,
    'the password is printed on that line only: never in a structured log line',
  )

  const login = await post(`${first.base}/v2/auth/login`, loginBody('admin@example.com', password))
  t.equal(login.status, 200, 'the printed password logs in')
  let token = ((await login.json()) as { data: { access_token: string } }).data.access_token
  const profile = async () => (await (await fetch(`${first.base}/v2/profile`, { headers: { authorization: `Bearer ${token}` } })).json()) as unknown
  t.match(await profile(), {
    data: { email: 'admin@example.com', sub_role_code: 'super_admin', principal_type: 'system_owner', merchant_id: null, must_change_password: true },
  }, 'a generated password is to be changed')
  const changed = await post(
    `${first.base}/v2/profile/password`,
    { command: 'change-password', data: { current_password: password, new_password: 'chosen-by-the-owner-1' } },
    { authorization: `Bearer ${token}` },
  )
  t.equal(changed.status, 200, 'the owner chooses a password')
  token = ((await changed.json()) as { data: { access_token: string } }).data.access_token
  t.match(await profile(), { data: { must_change_password: false } }, 'and the mark is gone')
  first.child.kill('SIGTERM')
  t.equal(await first.exited, 0)

  const second = await startServer(t, env)
  t.notOk(second.output().includes(password), 'a second start does not print the password')
  t.notMatch(second.output(), /admin@example\.com/, 'nor announce an admin')
  const again = await post(`${second.base}/v2/auth/login`, loginBody('admin@example.com', 'chosen-by-the-owner-1'))
  t.equal(again.status, 200, 'the chosen password still logs in')
  const oldToken = await fetch(`${second.base}/v2/profile`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(oldToken.status, 200, 'the generated signing key survived the restart')
  const count = await fetch(`${second.base}/v2/admin/permissions/audit-log?action=register&target_type=user`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(((await count.json()) as { data: { total: number } }).data.total, 1, 'one admin was ever created')
  second.child.kill('SIGTERM')
  t.equal(await second.exited, 0)
})

t.test('on PostgreSQL nothing is created implicitly', { skip: postgresUrl === undefined ? 'PostgreSQL only' : false }, async (t) => {
  const server = await startServer(t, { DATABASE_URL: await databaseFor(t), JWT_SECRET: SECRET })
  t.notMatch(server.output(), /admin@example\.com/, 'no first admin')
  t.match(server.output(), /BOOTSTRAP_ADMIN_EMAIL/, 'the log says how to bootstrap')
  const login = await post(`${server.base}/v2/auth/login`, loginBody('admin@example.com', 'anything-at-all'))
  t.equal(login.status, 401)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})

t.test('a start with bad configuration stops with a clear message and no stack trace', { skip: pgliteRunOnly('configuration refused before any database') }, async (t) => {
  const child = spawn(process.execPath, [...TEST_NODE_ARGS, 'src/http/server.ts'], {
    cwd: repositoryRoot,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: 'mysql://nope', LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let err = ''
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  t.equal(code, 1)
  t.match(err, /cannot start: DATABASE_URL must start with/)
  t.notMatch(err, /\n\s+at /, 'no stack trace')
})
