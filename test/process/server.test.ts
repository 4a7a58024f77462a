import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

interface Running {
  child: ChildProcess
  base: string
  logs: () => string
  exited: Promise<number | null>
}

/** The real runner, as `npm start` runs it, on an embedded store in `dir`. */
async function start(dir: string, env: Record<string, string> = {}): Promise<Running> {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/http/server.ts'], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: `pglite://${dir}`, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 120; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return { child, base, logs: () => output, exited }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  child.kill('SIGKILL')
  throw new Error(`the server did not start:\n${output}`)
}

const post = (url: string, body: unknown, token?: string) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  })

t.test('the real server: first start, login, logs, graceful stop', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'aps-server-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))

  const first = await start(dir)
  t.teardown(() => first.child.kill('SIGKILL'))
  const announced = /FIRST START: created the system-owner super_admin admin@example\.com with password (\S+)/.exec(first.logs())
  t.ok(announced, 'the first start prints the first admin once')
  const password = announced?.[1] ?? ''

  const login = await post(`${first.base}/v2/auth/login`, { command: 'login', data: { email: 'admin@example.com', password } })
  t.equal(login.status, 200, 'the printed password logs in')
  const token = ((await login.json()) as { data: { access_token: string } }).data.access_token
  const profile = await fetch(`${first.base}/v2/profile`, { headers: { authorization: `Bearer ${token}`, 'x-request-id': 'trace-me-123' } })
  t.equal(profile.status, 200)
  t.equal(profile.headers.get('x-request-id'), 'trace-me-123', 'the request id is echoed')
  const registered = await post(
    `${first.base}/v2/admin/register`,
    { command: 'register-admin', data: { email: 'ana@example.com', password: 'secret-passphrase-9', name: 'Ana', sub_role_code: 'support' } },
    token,
  )
  t.equal(registered.status, 201)

  // A request in flight when SIGTERM arrives still gets its answer.
  const inFlight = post(`${first.base}/v2/auth/login`, { command: 'login', data: { email: 'admin@example.com', password } })
  await new Promise((resolve) => setTimeout(resolve, 5))
  first.child.kill('SIGTERM')
  const late = await inFlight.catch(() => null)
  t.ok(late === null || late.status === 200 || late.status === 503, 'in-flight request finished or was refused cleanly')
  t.equal(await first.exited, 0, 'SIGTERM exits 0')

  const logs = first.logs()
  t.match(logs, /"reqId":"trace-me-123"/, 'log lines carry the request id')
  t.notMatch(logs, new RegExp(token.slice(-20)), 'no bearer token in the logs')
  t.notMatch(logs, /secret-passphrase-9/, 'no password of a request in the logs')
  t.match(logs, /"msg":"service ready"/)

  const second = await start(dir)
  t.teardown(() => second.child.kill('SIGKILL'))
  t.notMatch(second.logs(), /FIRST START/, 'a second start prints nothing')
  const again = await post(`${second.base}/v2/auth/login`, { command: 'login', data: { email: 'admin@example.com', password } })
  t.equal(again.status, 200, 'the data and the generated key survive a restart')
  const oldToken = await fetch(`${second.base}/v2/profile`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(oldToken.status, 200, 'tokens issued before the restart still verify')
  second.child.kill('SIGTERM')
  t.equal(await second.exited, 0)
})

t.test('a start with bad configuration stops with a clear message', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/http/server.ts'], {
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
