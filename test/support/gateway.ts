/**
 * What the gateway tests share: the compiled service as the image runs it,
 * an upstream that echoes what reaches it, a recorder between the proxy and
 * the service, the processes' clean-up, and the walk-through's merchant and
 * clerk. Each test then puts its own proxy in front.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, symlinkSync } from 'node:fs'
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Test } from 'tap'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, tempDir } from '../helper.js'
import { normaliseOriginalPath } from '../../src/domain/originalPath.js'
import { AMBIGUOUS_PATHS } from './ambiguousPaths.js'
import { compiledDist } from './compiledBuild.js'
import { COMPILE_CACHE_ENV, WASM_BASELINE_ONLY } from './nodeArgs.js'
import { sendRaw } from './rawRequest.js'
import { freePort, processDatabase, repositoryRoot, startServer } from './serverProcess.js'

const run = promisify(execFile)
export const ROUTE_MAP = join(repositoryRoot, 'gateway', 'routes.example.json')
export const MERCHANT = 'm-1001'
const PASSWORD = 'a-long-passphrase'

export interface Teardown {
  teardown(fn: () => unknown): void
}

/** A proxy's binary at one of the usual places or on PATH, or why the test cannot run. */
export async function binaryOrReason(name: string, places: string[]): Promise<{ path: string } | { reason: string }> {
  for (const candidate of places) if (existsSync(candidate)) return { path: candidate }
  try {
    const found = (await run('sh', ['-c', `command -v ${name}`])).stdout.trim()
    if (found !== '') return { path: found }
  } catch {
    // not on PATH either
  }
  return { reason: `${name} is not installed (the CI script installs it; tests never install packages)` }
}

/** Processes to end if the test process goes before its teardowns ran. */
export const groups = new Set<number>()
process.on('exit', () => {
  for (const pid of groups) killGroup(pid, 'SIGKILL')
})

export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

/** Stops a spawned process by its pid, then anything left of its group. */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>, signal: NodeJS.Signals): Promise<void> {
  const pid = child.pid as number
  if (child.exitCode === null && child.signalCode === null) {
    child.kill(signal)
    const late = await Promise.race([exited.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 10_000).unref())])
    if (late) killGroup(pid, 'SIGKILL')
    await exited
  }
  // A proxy's workers leave when their master does; this catches any that did not.
  killGroup(pid, 'SIGKILL')
  groups.delete(pid)
}

export interface Service {
  base: string
  how: string
  /** What the service has written to stdout and stderr so far. */
  output(): string
}

/**
 * The compiled service as the image runs it: `npm run build`'s output
 * (compiledDist: built once per source tree) in a folder laid out like the
 * image's /app (package.json, dist/, sql/, console/, model.conf,
 * model.decisions; the repository's node_modules linked), started with plain node. A private folder, because
 * other test runs may use the build at the same time. When the tree
 * does not build, or the build does not start, the service runs from source
 * through tsx instead, and the test says so.
 */
export async function startService(t: Teardown & { comment(...args: unknown[]): void }, env: Record<string, string>): Promise<Service> {
  const app = join(tempDir(t, 'aps-gateway-'), 'app')
  mkdirSync(app)
  let why: string
  try {
    await compiledDist(join(app, 'dist'))
    cpSync(join(repositoryRoot, 'package.json'), join(app, 'package.json'))
    cpSync(join(repositoryRoot, 'model.conf'), join(app, 'model.conf'))
    cpSync(join(repositoryRoot, 'model.decisions'), join(app, 'model.decisions'))
    cpSync(join(repositoryRoot, 'sql'), join(app, 'sql'), { recursive: true })
    cpSync(join(repositoryRoot, 'console'), join(app, 'console'), { recursive: true })
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
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(port), ...COMPILE_CACHE_ENV, ...env },
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

export async function command<T>(base: string, path: string, token: string | null, command: string, data: Record<string, unknown>, method = 'POST'): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token !== null ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ command, data }),
  })
  const body = (await res.json()) as { data: T }
  if (!res.ok) throw new Error(`${command}: ${res.status} ${JSON.stringify(body)}`)
  return body.data
}

export const login = async (base: string, email: string, password: string) =>
  (await command<{ access_token: string }>(base, '/v2/auth/login', null, 'login', { email, password })).access_token

/**
 * Starts a proxy in a process group of its own and waits until its port
 * answers; `stop` is the signal of its graceful stop. `log` adds the proxy's
 * own log file to what a failure shows; `output` is what it wrote to stdout
 * and stderr so far.
 */
export async function startProxy(
  t: Teardown,
  proxy: { binary: string; args: string[]; port: number; stop: NodeJS.Signals; log: () => string; env?: Record<string, string> },
): Promise<{ pid: number; output: () => string }> {
  const child = spawn(proxy.binary, proxy.args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...(proxy.env !== undefined ? { env: proxy.env } : {}) })
  if (child.pid === undefined) throw new Error(`could not spawn ${proxy.binary}`)
  const pid = child.pid
  groups.add(pid)
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(() => stopChild(child, exited, proxy.stop))

  const deadline = Date.now() + 15_000
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${proxy.binary} exited at start:\n${output}\n${proxy.log()}`)
    const answered = await sendRaw(proxy.port, 'GET', '/').then(
      () => true,
      () => false,
    )
    if (answered) return { pid, output: () => output }
    if (Date.now() > deadline) throw new Error(`${proxy.binary} did not answer within 15 s:\n${output}\n${proxy.log()}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

// ---------------------------------------------------------------- the test's own HTTP pieces

export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.once('end', () => resolve(Buffer.concat(chunks)))
    req.once('error', reject)
  })
}

export async function listen(t: Teardown, server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)).then(() => server.closeAllConnections()))
  return (server.address() as AddressInfo).port
}

/** What the upstream application saw of one request. */
export interface Seen {
  method: string
  url: string
  user_id: string | null
  merchant_id: string | null
  body_bytes: number
  headers: IncomingHttpHeaders
}

export async function startUpstream(t: Teardown): Promise<{ port: number; seen: Seen[] }> {
  const seen: Seen[] = []
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      const one = (name: string) => {
        const value = req.headers[name]
        return typeof value === 'string' ? value : null
      }
      const entry: Seen = { method: req.method ?? '', url: req.url ?? '', user_id: one('x-authz-user-id'), merchant_id: one('x-authz-merchant-id'), body_bytes: body.length, headers: req.headers }
      seen.push(entry)
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(entry))
    })
  })
  return { port: await listen(t, server), seen }
}

/** What the service was sent by nginx for one sub-request. */
export interface SubRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body_bytes: number
}

/** Passes every request through to the service unchanged and keeps a note of it. */
export async function startRecorder(t: Teardown, servicePort: number): Promise<{ port: number; subRequests: SubRequest[] }> {
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

/** The walk-through of docs/getting-started.md behind a gateway: the service, a merchant, a clerk in it with three grants, the upstream and the recorder. */
export async function gatewayWorld(t: Teardown & { comment(...args: unknown[]): void }) {
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
  const rootId = ((await (await fetch(`${service.base}/v2/profile`, { headers: { authorization: `Bearer ${root}` } })).json()) as { data: { id: string } }).data.id

  const upstream = await startUpstream(t)
  const recorder = await startRecorder(t, servicePort)
  return { service, root, rootId, clerk, clerkToken, upstream, recorder }
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

export type GatewayWorld = Awaited<ReturnType<typeof gatewayWorld>>

/**
 * What every forward-auth recipe must do, asked through the proxy on `port`:
 * allow, deny, refuse without a token, follow the route map, refuse an
 * ambiguous path, keep bodies from the service. `passes` is the URI the
 * proxy hands on (upstream and to the service) for a target the client sent.
 */
export function sharedGatewayTests(t: Test, proxy: string, port: number, world: GatewayWorld, passes: (target: string) => string = (target) => target): void {
  const { service, clerk, clerkToken, upstream, recorder } = world
  const reached = () => upstream.seen.length
  const lastSubRequest = () => recorder.subRequests.at(-1)

  t.test('an allowed request reaches the upstream with the identity headers', async (t) => {
    const before = reached()
    const res = await sendRaw(port, 'GET', '/api/orders/42?expand=items', bearer(clerkToken))
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
    const res = await sendRaw(port, 'POST', '/api/orders/42/refund', { ...bearer(clerkToken), 'content-type': 'application/json' }, body)
    t.equal(res.status, 403, 'refund is not granted')
    t.equal(reached(), before, 'the upstream never saw it')
    const sub = lastSubRequest()
    t.equal(sub?.method, 'GET', 'the sub-request for a POST is a GET')
    t.equal(sub?.headers['x-original-method'], 'POST', 'the original method in X-Original-Method')
    t.equal(sub?.body_bytes, 0, 'no body in the sub-request')
    t.notOk(Number(sub?.headers['content-length'] ?? 0) > 0, 'nor a length announcing one')
  })

  t.test('an allowed request with a body reaches the upstream whole', async (t) => {
    const body = Buffer.alloc(64 * 1024, 'a')
    const res = await sendRaw(port, 'GET', '/api/orders', { ...bearer(clerkToken), 'content-type': 'text/plain' }, body)
    t.equal(res.status, 200, 'allowed')
    t.equal((JSON.parse(res.body) as Seen).body_bytes, body.length, 'the upstream got the whole body')
    t.equal(lastSubRequest()?.body_bytes, 0, 'the service got none of it')
  })

  t.test('a request without a token, or with a bad one, is stopped with 401', async (t) => {
    const before = reached()
    t.equal((await sendRaw(port, 'GET', '/api/orders/42')).status, 401, 'no token')
    t.equal((await sendRaw(port, 'GET', '/api/orders/42', bearer('not.a.token'))).status, 401, 'a bad token')
    t.equal(reached(), before, 'the upstream never saw them')
  })

  t.test('the route map decides, with the domain taken from the path', async (t) => {
    const status = async (method: string, path: string) => (await sendRaw(port, method, path, bearer(clerkToken))).status
    t.equal(await status('GET', `/api/merchants/${MERCHANT}/payouts`), 200, "payouts of the clerk's merchant")
    t.equal(await status('GET', '/api/merchants/m-2002/payouts'), 403, "another merchant's payouts")
    t.equal(await status('GET', '/api/customers'), 403, 'a mapped pair the clerk lacks')
    t.equal(await status('GET', '/api/unmapped'), 403, 'a path no entry maps')
    t.equal(await status('DELETE', '/api/orders/42'), 403, 'a method no entry maps')
    t.equal(await status('GET', '/api/orders/42/../../settings/x'), 403, `dot segments, which ${proxy} would resolve for its own routing`)
    t.equal(lastSubRequest()?.headers['x-original-uri'], '/api/orders/42/../../settings/x', 'the service judged the URI as sent')
  })

  t.test('a path the upstream could read as another resource is refused, never passed on', async (t) => {
    t.equal((await sendRaw(port, 'GET', '/api/products/1', bearer(clerkToken))).status, 200, 'the clerk may read products')
    t.equal((await sendRaw(port, 'GET', '/api/customers/1', bearer(clerkToken))).status, 403, 'but not customers')
    const before = reached()
    const refusedByService: string[] = []
    const loggedReasons: string[] = []
    for (const { path, reason, requestLine } of AMBIGUOUS_PATHS) {
      if (!requestLine) continue
      const target = `/api${path}`
      const asked = recorder.subRequests.length
      const res = await sendRaw(port, 'GET', target, bearer(clerkToken))
      const sub = recorder.subRequests.length > asked ? lastSubRequest() : undefined
      if (sub === undefined) {
        // A proxy refuses some targets itself (nginx a `..` above the root or an encoded NUL, Go a control character), before asking anyone.
        t.equal(res.status, 400, `${target} (${reason}): ${proxy}'s own 400`)
        continue
      }
      t.equal(res.status, 403, `${target} (${reason}): 403`)
      t.equal(sub.headers['x-original-uri'], passes(target), `${target}: the service judged the URI ${proxy} passes on`)
      refusedByService.push(reason)
      // The reason the service gives is its reading of the URI it was passed (Caddy re-escapes `\\` and `#`).
      const judged = normaliseOriginalPath(String(sub.headers['x-original-uri']))
      if ('ambiguous' in judged) loggedReasons.push(judged.ambiguous)
    }
    t.equal(reached(), before, 'the upstream never saw any of them')
    const askedAbout = new Set(refusedByService)
    t.ok(['semicolon', 'encoded-semicolon', 'backslash', 'encoded-backslash', 'dot-segment'].every((r) => askedAbout.has(r)), `${proxy} passed on the reported forms, and the service refused them`)
    const unlogged = () => [...new Set(loggedReasons)].filter((reason) => !service.output().includes(`ambiguous original path (${reason})`))
    // The service's output reaches this process through a pipe: wait for it, within a bound.
    for (let deadline = Date.now() + 10_000; unlogged().length > 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 100))
    t.same(unlogged(), [], 'each refusal is in the service log with its reason')
  })
}
