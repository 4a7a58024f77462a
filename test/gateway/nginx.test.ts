/**
 * The shipped nginx forward-auth recipe end to end: gateway/nginx.conf (only
 * its ports and file paths changed) in front of an upstream that echoes what
 * reaches it, asking the compiled service, started with
 * gateway/routes.example.json as its route map. Between nginx and the service
 * sits a recorder that passes everything through and notes each sub-request,
 * so the test can also show what nginx sends the service.
 *
 * The test never installs nginx (the CI script does): without an nginx
 * binary it is skipped, saying so.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, tempDir } from '../helper.js'
import { AMBIGUOUS_PATHS } from '../support/ambiguousPaths.js'
import { sendRaw as send } from '../support/rawRequest.js'
import { freePort, processDatabase, repositoryRoot, startServer } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { WASM_BASELINE_ONLY } from '../support/nodeArgs.js'

onceOnPGlite('the nginx gateway in front of the service')

const run = promisify(execFile)
const NGINX_CONF = join(repositoryRoot, 'gateway', 'nginx.conf')
const ROUTE_MAP = join(repositoryRoot, 'gateway', 'routes.example.json')
const MERCHANT = 'm-1001'
const PASSWORD = 'a-long-passphrase'

interface Teardown {
  teardown(fn: () => unknown): void
}

// ---------------------------------------------------------------- nginx itself

async function findNginx(): Promise<string | null> {
  for (const candidate of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) if (existsSync(candidate)) return candidate
  try {
    return (await run('sh', ['-c', 'command -v nginx'])).stdout.trim() || null
  } catch {
    return null
  }
}

/** nginx's binary, or why the test cannot run. */
async function nginxOrReason(): Promise<{ path: string } | { reason: string }> {
  const found = await findNginx()
  return found !== null ? { path: found } : { reason: 'nginx is not installed (the CI script installs it; tests never install packages)' }
}

/**
 * The shipped configuration with the test's ports and a private prefix for
 * logs and temporary files. Each change must find its line, so a changed
 * recipe fails here rather than being tested in some other form.
 */
function nginxConfig(shipped: string, prefix: string, ports: { nginx: number; app: number; authz: number }): string {
  let text = shipped
  const replace = (pattern: RegExp, by: string) => {
    if (!pattern.test(text)) throw new Error(`gateway/nginx.conf no longer has ${pattern}`)
    text = text.replace(pattern, by)
  }
  replace(/^error_log [^;]+;/m, `error_log ${prefix}/error.log info;`)
  replace(
    /^(\s*)access_log [^;]+;/m,
    ['access_log', 'client_body_temp_path', 'proxy_temp_path', 'fastcgi_temp_path', 'uwsgi_temp_path', 'scgi_temp_path']
      .map((directive, i) => `$1${directive} ${prefix}/${i === 0 ? 'access.log' : directive.replace('_path', '')};`)
      .join('\n'),
  )
  replace(/\blisten 8000;/, `listen 127.0.0.1:${ports.nginx};`)
  replace(/\bserver 127\.0\.0\.1:8080;/, `server 127.0.0.1:${ports.app};`)
  replace(/\bserver 127\.0\.0\.1:3000;/, `server 127.0.0.1:${ports.authz};`)
  return text
}

interface RunningNginx {
  pid: number
  errorLog(): string
}

/** Processes to end if the test process goes before its teardowns ran. */
const groups = new Set<number>()
process.on('exit', () => {
  for (const pid of groups) killGroup(pid, 'SIGKILL')
})

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

/** Stops a spawned process by its pid, then anything left of its group. */
async function stopChild(child: ChildProcess, exited: Promise<unknown>, signal: NodeJS.Signals): Promise<void> {
  const pid = child.pid as number
  if (child.exitCode === null && child.signalCode === null) {
    child.kill(signal)
    const late = await Promise.race([exited.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 10_000).unref())])
    if (late) killGroup(pid, 'SIGKILL')
    await exited
  }
  // nginx's workers leave when their master does; this catches any that did not.
  killGroup(pid, 'SIGKILL')
  groups.delete(pid)
}

async function startNginx(t: Teardown, binary: string, config: string, prefix: string, port: number): Promise<RunningNginx> {
  const conf = join(prefix, 'nginx.conf')
  writeFileSync(conf, config)
  const args = ['-c', conf, '-p', `${prefix}/`, '-g', `daemon off; pid ${prefix}/nginx.pid;`]
  const errorLog = () => (existsSync(join(prefix, 'error.log')) ? readFileSync(join(prefix, 'error.log'), 'utf8') : '')
  await run(binary, ['-t', ...args]).catch((error: { stderr?: string }) => {
    throw new Error(`nginx -t refused the configuration:\n${error.stderr ?? ''}\n--- configuration ---\n${config}`)
  })
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  if (child.pid === undefined) throw new Error(`could not spawn ${binary}`)
  const pid = child.pid
  groups.add(pid)
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  // SIGQUIT: nginx's graceful stop, answering what it holds.
  t.teardown(() => stopChild(child, exited, 'SIGQUIT'))

  const deadline = Date.now() + 15_000
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nginx exited at start:\n${output}\n${errorLog()}`)
    const answered = await send(port, 'GET', '/').then(
      () => true,
      () => false,
    )
    if (answered) return { pid, errorLog }
    if (Date.now() > deadline) throw new Error(`nginx did not answer within 15 s:\n${output}\n${errorLog()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

// ---------------------------------------------------------------- the service

interface Service {
  base: string
  how: string
  /** What the service has written to stdout and stderr so far. */
  output(): string
}

/**
 * The compiled service as the image runs it: `npm run build` into a folder
 * laid out like the image's /app (package.json, dist/, sql/, model.conf; the
 * repository's node_modules linked), started with plain node. A private
 * folder, because other test runs may build at the same time. When the tree
 * does not build, or the build does not start, the service runs from source
 * through tsx instead, and the test says so.
 */
async function startService(t: Teardown & { comment(...args: unknown[]): void }, env: Record<string, string>): Promise<Service> {
  const app = join(tempDir(t, 'aps-gateway-'), 'app')
  mkdirSync(app)
  let why: string
  try {
    await run('npm', ['run', 'build', '--', '--outDir', join(app, 'dist')], { cwd: repositoryRoot, timeout: 120_000 })
    cpSync(join(repositoryRoot, 'package.json'), join(app, 'package.json'))
    cpSync(join(repositoryRoot, 'model.conf'), join(app, 'model.conf'))
    cpSync(join(repositoryRoot, 'sql'), join(app, 'sql'), { recursive: true })
    symlinkSync(join(repositoryRoot, 'node_modules'), join(app, 'node_modules'), 'dir')
    return await startCompiled(t, app, env)
  } catch (error) {
    why = (error as { stderr?: string }).stderr?.trim().split('\n').slice(-5).join('\n') || (error as Error).message
  }
  t.comment(`the compiled service did not run, so the service runs from source through tsx: ${why}`)
  const server = await startServer(t, { env, name: 'service (tsx)' })
  return { base: server.base, how: 'from source (tsx)', output: server.output }
}

async function startCompiled(t: Teardown, app: string, env: Record<string, string>): Promise<Service> {
  const port = await freePort()
  const child = spawn(process.execPath, [WASM_BASELINE_ONLY, 'dist/http/server.js'], {
    cwd: app,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  if (child.pid === undefined) throw new Error('could not spawn the compiled service')
  groups.add(child.pid)
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(() => stopChild(child, exited, 'SIGTERM'))
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the compiled service exited at start:\n${output}`)
    const health = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) }).catch(() => null)
    if (health?.ok === true) return { base, how: 'compiled (npm run build, node dist/http/server.js)', output: () => output }
    await new Promise((resolve) => setTimeout(resolve, 150))
  }
  throw new Error(`the compiled service did not answer /healthz within 60 s:\n${output}`)
}

async function command<T>(base: string, path: string, token: string | null, command: string, data: Record<string, unknown>): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token !== null ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ command, data }),
  })
  const body = (await res.json()) as { data: T }
  if (!res.ok) throw new Error(`${command}: ${res.status} ${JSON.stringify(body)}`)
  return body.data
}

const login = async (base: string, email: string, password: string) =>
  (await command<{ access_token: string }>(base, '/v2/auth/login', null, 'login', { email, password })).access_token

// ---------------------------------------------------------------- the test's own HTTP pieces

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
  })
}

async function listen(t: Teardown, server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)).then(() => server.closeAllConnections()))
  return (server.address() as AddressInfo).port
}

/** What the upstream application saw of one request. */
interface Seen {
  method: string
  url: string
  user_id: string | null
  merchant_id: string | null
  body_bytes: number
}

async function startUpstream(t: Teardown): Promise<{ port: number; seen: Seen[] }> {
  const seen: Seen[] = []
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      const one = (name: string) => {
        const value = req.headers[name]
        return typeof value === 'string' ? value : null
      }
      const entry: Seen = { method: req.method ?? '', url: req.url ?? '', user_id: one('x-authz-user-id'), merchant_id: one('x-authz-merchant-id'), body_bytes: body.length }
      seen.push(entry)
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(entry))
    })
  })
  return { port: await listen(t, server), seen }
}

/** What the service was sent by nginx for one sub-request. */
interface SubRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body_bytes: number
}

/** Passes every request through to the service unchanged and keeps a note of it. */
async function startRecorder(t: Teardown, servicePort: number): Promise<{ port: number; subRequests: SubRequest[] }> {
  const subRequests: SubRequest[] = []
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      subRequests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body_bytes: body.length })
      const upstream = request({ host: '127.0.0.1', port: servicePort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      upstream.once('error', () => res.writeHead(502).end())
      upstream.end(body)
    })
  })
  return { port: await listen(t, server), subRequests }
}

// ---------------------------------------------------------------- the test

const nginx = await nginxOrReason()

t.test('nginx auth_request with the shipped configuration and route map', { skip: 'reason' in nginx ? nginx.reason : false, timeout: 170_000 }, async (t) => {
  if ('reason' in nginx) return
  const startedAt = Date.now()

  const db = await processDatabase(t)
  const service = await startService(t, {
    DATABASE_URL: db.url,
    JWT_SECRET: TEST_SECRET,
    BOOTSTRAP_ADMIN_EMAIL: ROOT_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: ROOT_PASSWORD,
    ROUTE_MAP_PATH: ROUTE_MAP,
    LOG_LEVEL: 'warn',
  })
  t.comment(`the service runs ${service.how} on ${db.kind}`)
  const servicePort = Number(new URL(service.base).port)

  // The walk-through of docs/getting-started.md: a merchant, a clerk in it, and one grant for the clerk's sub-role.
  const root = await login(service.base, ROOT_EMAIL, ROOT_PASSWORD)
  await command(service.base, '/v2/admin/merchants', root, 'onboard-merchant', { merchant_id: MERCHANT, email: `owner@${MERCHANT}.example`, password: PASSWORD, name: 'Owner' })
  const clerk = await command<{ id: string }>(service.base, '/v2/admin/register', root, 'register-admin', {
    email: `clerk@${MERCHANT}.example`,
    password: PASSWORD,
    name: 'Clerk',
    sub_role_code: 'clerk',
    merchant_id: MERCHANT,
  })
  for (const [obj, act] of [
    ['orders', 'read'],
    ['payouts', 'read'],
    ['products', 'read'],
  ] as const) {
    await command(service.base, '/v2/admin/permissions/roles/clerk/grant', root, 'grant-role-permission', { obj, act, domain: MERCHANT })
  }
  const clerkToken = await login(service.base, `clerk@${MERCHANT}.example`, PASSWORD)
  const rootId = (await (await fetch(`${service.base}/v2/profile`, { headers: { authorization: `Bearer ${root}` } })).json()) as { data: { id: string } }

  const upstream = await startUpstream(t)
  const recorder = await startRecorder(t, servicePort)
  const prefix = tempDir(t, 'aps-nginx-')
  // nginx's workers run as an unprivileged user when it is started as root: they must reach the temporary folders.
  chmodSync(prefix, 0o755)
  const port = await freePort()
  const config = nginxConfig(readFileSync(NGINX_CONF, 'utf8'), prefix, { nginx: port, app: upstream.port, authz: recorder.port })
  const proxy = await startNginx(t, nginx.path, config, prefix, port)
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
  const reached = () => upstream.seen.length
  const lastSubRequest = () => recorder.subRequests.at(-1)

  t.test('an allowed request reaches the upstream with the identity headers', async (t) => {
    const before = reached()
    const res = await send(port, 'GET', '/api/orders/42?expand=items', bearer(clerkToken))
    t.equal(res.status, 200, 'the upstream answered')
    const seen = JSON.parse(res.body) as Seen
    t.equal(reached(), before + 1, 'the upstream got it')
    t.equal(seen.url, '/api/orders/42?expand=items', 'with its URI unchanged')
    t.equal(seen.user_id, clerk.id, 'X-Authz-User-Id is the clerk')
    t.equal(seen.merchant_id, MERCHANT, "X-Authz-Merchant-Id is the clerk's merchant")

    const sub = lastSubRequest()
    t.equal(sub?.method, 'GET', 'the sub-request is a GET')
    t.equal(sub?.url, '/v2/authz/verify', 'to the verify route, without the client query')
    t.equal(sub?.headers.authorization, `Bearer ${clerkToken}`, "with the user's own token")
    t.equal(sub?.headers['x-original-method'], 'GET', 'X-Original-Method')
    t.equal(sub?.headers['x-original-uri'], '/api/orders/42?expand=items', 'X-Original-URI, query included')
  })

  t.test('a denied request is stopped with 403, and its body never goes to the service', async (t) => {
    const before = reached()
    const body = Buffer.from(JSON.stringify({ amount: 10, reason: 'x'.repeat(64 * 1024) }))
    const res = await send(port, 'POST', '/api/orders/42/refund', { ...bearer(clerkToken), 'content-type': 'application/json' }, body)
    t.equal(res.status, 403, 'refund is not granted')
    t.equal(reached(), before, 'the upstream never saw it')
    const sub = lastSubRequest()
    t.equal(sub?.method, 'GET', 'the sub-request for a POST is a GET too')
    t.equal(sub?.headers['x-original-method'], 'POST', 'the original method in X-Original-Method')
    t.equal(sub?.body_bytes, 0, 'no body in the sub-request')
    t.notOk(Number(sub?.headers['content-length'] ?? 0) > 0, 'nor a length announcing one')
    t.equal(sub?.headers['content-type'], undefined, "none of the client's other headers")
  })

  t.test('an allowed request with a body reaches the upstream whole', async (t) => {
    const body = Buffer.alloc(64 * 1024, 'a')
    const res = await send(port, 'GET', '/api/orders', { ...bearer(clerkToken), 'content-type': 'text/plain' }, body)
    t.equal(res.status, 200, 'allowed')
    t.equal((JSON.parse(res.body) as Seen).body_bytes, body.length, 'the upstream got the whole body')
    t.equal(lastSubRequest()?.body_bytes, 0, 'the service got none of it')
  })

  t.test('a request without a token, or with a bad one, is stopped with 401', async (t) => {
    const before = reached()
    t.equal((await send(port, 'GET', '/api/orders/42')).status, 401, 'no token')
    t.equal((await send(port, 'GET', '/api/orders/42', bearer('not.a.token'))).status, 401, 'a bad token')
    t.equal(reached(), before, 'the upstream never saw them')
  })

  t.test('the route map decides, with the domain taken from the path', async (t) => {
    const status = async (method: string, path: string) => (await send(port, method, path, bearer(clerkToken))).status
    t.equal(await status('GET', `/api/merchants/${MERCHANT}/payouts`), 200, "payouts of the clerk's merchant")
    t.equal(await status('GET', '/api/merchants/m-2002/payouts'), 403, "another merchant's payouts")
    t.equal(await status('GET', '/api/customers'), 403, 'a mapped pair the clerk lacks')
    t.equal(await status('GET', '/api/unmapped'), 403, 'a path no entry maps')
    t.equal(await status('DELETE', '/api/orders/42'), 403, 'a method no entry maps')
    t.equal(await status('GET', '/api/orders/42/../../settings/x'), 403, 'dot segments, which nginx would resolve for its own routing')
    t.equal(lastSubRequest()?.headers['x-original-uri'], '/api/orders/42/../../settings/x', 'the service judged the URI as sent')
  })

  t.test('a path the upstream could read as another resource is refused, never passed on', async (t) => {
    t.equal((await send(port, 'GET', '/api/products/1', bearer(clerkToken))).status, 200, 'the clerk may read products')
    t.equal((await send(port, 'GET', '/api/customers/1', bearer(clerkToken))).status, 403, 'but not customers')
    const before = reached()
    const refusedByService: string[] = []
    for (const { path, reason, requestLine } of AMBIGUOUS_PATHS) {
      if (!requestLine) continue
      const target = `/api${path}`
      const asked = recorder.subRequests.length
      const res = await send(port, 'GET', target, bearer(clerkToken))
      const sub = recorder.subRequests.length > asked ? lastSubRequest() : undefined
      if (sub === undefined) {
        // nginx refuses some targets itself (a `..` above the root, an encoded NUL), before asking anyone.
        t.equal(res.status, 400, `${target} (${reason}): nginx's own 400`)
        continue
      }
      t.equal(res.status, 403, `${target} (${reason}): 403`)
      t.equal(sub.headers['x-original-uri'], target, `${target}: the service judged the URI as sent`)
      refusedByService.push(reason)
    }
    t.equal(reached(), before, 'the upstream never saw any of them')
    const askedAbout = new Set(refusedByService)
    t.ok(['semicolon', 'encoded-semicolon', 'backslash', 'encoded-backslash', 'dot-segment'].every((r) => askedAbout.has(r)), 'nginx passed on the reported forms, and the service refused them')
    const unlogged = () => [...new Set(refusedByService)].filter((reason) => !service.output().includes(`ambiguous original path (${reason})`))
    // The service's output reaches this process through a pipe: wait for it, within a bound.
    for (let deadline = Date.now() + 10_000; unlogged().length > 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 100))
    t.same(unlogged(), [], 'each refusal is in the service log with its reason')
  })

  t.test("a client's own headers neither name the pair nor the identity", async (t) => {
    const forged = {
      ...bearer(clerkToken),
      'x-authz-obj': 'orders',
      'x-authz-act': 'read',
      'x-original-method': 'GET',
      'x-original-uri': '/api/orders',
      'x-forwarded-method': 'GET',
      'x-forwarded-uri': '/api/orders',
    }
    t.equal((await send(port, 'POST', '/api/orders/42/refund', forged)).status, 403, 'still the refund the route map names')
    const sub = lastSubRequest()
    t.equal(sub?.headers['x-authz-obj'], undefined, 'X-Authz-Obj is not passed on')
    t.equal(sub?.headers['x-original-uri'], '/api/orders/42/refund', "nginx's X-Original-URI, not the client's")
    t.equal(sub?.headers['x-forwarded-uri'], undefined, 'X-Forwarded-Uri is not passed on')

    const res = await send(port, 'GET', '/api/reports/daily', { ...bearer(root), 'x-authz-user-id': clerk.id, 'x-authz-merchant-id': 'm-2002' })
    t.equal(res.status, 200, 'the system owner may read reports')
    const seen = JSON.parse(res.body) as Seen
    t.equal(seen.user_id, rootId.data.id, "the upstream sees the caller's id, not the forged one")
    t.equal(seen.merchant_id, null, 'and no merchant for a system-owner user, whatever the client sent')
  })

  t.test('every sub-request went to the verify route', async (t) => {
    t.ok(recorder.subRequests.length >= 10, 'one sub-request per request')
    t.same([...new Set(recorder.subRequests.map((s) => `${s.method} ${s.url}`))], ['GET /v2/authz/verify'], 'all GET /v2/authz/verify')
    t.notMatch(proxy.errorLog(), /\[(alert|emerg|crit)\]/, 'nothing serious in the error log', { log: proxy.errorLog() })
    t.comment(`set-up and requests took ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)
  })
})
