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
import { execFile } from 'node:child_process'
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { tempDir } from '../helper.js'
import { bearer, binaryOrReason, gatewayWorld, sharedGatewayTests, startProxy, type Seen, type Teardown } from '../support/gateway.js'
import { sendRaw as send } from '../support/rawRequest.js'
import { freePort, repositoryRoot } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the nginx gateway in front of the service')

const run = promisify(execFile)
const NGINX_CONF = join(repositoryRoot, 'gateway', 'nginx.conf')

// ---------------------------------------------------------------- nginx itself

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

async function startNginx(t: Teardown, binary: string, config: string, prefix: string, port: number): Promise<RunningNginx> {
  const conf = join(prefix, 'nginx.conf')
  writeFileSync(conf, config)
  const args = ['-c', conf, '-p', `${prefix}/`, '-g', `daemon off; pid ${prefix}/nginx.pid;`]
  const errorLog = () => (existsSync(join(prefix, 'error.log')) ? readFileSync(join(prefix, 'error.log'), 'utf8') : '')
  await run(binary, ['-t', ...args]).catch((error: { stderr?: string }) => {
    throw new Error(`nginx -t refused the configuration:\n${error.stderr ?? ''}\n--- configuration ---\n${config}`)
  })
  // SIGQUIT: nginx's graceful stop, answering what it holds.
  const { pid } = await startProxy(t, { binary, args, port, stop: 'SIGQUIT', log: errorLog })
  return { pid, errorLog }
}

// ---------------------------------------------------------------- the test

const nginx = await binaryOrReason('nginx', ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'])

t.test('nginx auth_request with the shipped configuration and route map', { skip: 'reason' in nginx ? nginx.reason : false, timeout: 170_000 }, async (t) => {
  if ('reason' in nginx) return
  const startedAt = Date.now()

  const world = await gatewayWorld(t)
  const { root, rootId, clerk, clerkToken, upstream, recorder } = world
  const prefix = tempDir(t, 'aps-nginx-')
  // nginx's workers run as an unprivileged user when it is started as root: they must reach the temporary folders.
  chmodSync(prefix, 0o755)
  const port = await freePort()
  const config = nginxConfig(readFileSync(NGINX_CONF, 'utf8'), prefix, { nginx: port, app: upstream.port, authz: recorder.port })
  const proxy = await startNginx(t, nginx.path, config, prefix, port)
  const lastSubRequest = () => recorder.subRequests.at(-1)

  sharedGatewayTests(t, 'nginx', port, world)

  t.test("none of the client's other headers reach the service", async (t) => {
    await send(port, 'POST', '/api/orders/42/refund', { ...bearer(clerkToken), 'content-type': 'application/json' }, Buffer.from('{}'))
    t.equal(lastSubRequest()?.headers['content-type'], undefined, 'no Content-Type')
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
    t.equal(seen.user_id, rootId, "the upstream sees the caller's id, not the forged one")
    t.equal(seen.merchant_id, null, 'and no merchant for a system-owner user, whatever the client sent')
  })

  t.test('every sub-request went to the verify route', async (t) => {
    t.ok(recorder.subRequests.length >= 10, 'one sub-request per request')
    t.same([...new Set(recorder.subRequests.map((s) => `${s.method} ${s.url}`))], ['GET /v2/authz/verify'], 'all GET /v2/authz/verify')
    t.notMatch(proxy.errorLog(), /\[(alert|emerg|crit)\]/, 'nothing serious in the error log', { log: proxy.errorLog() })
    t.comment(`set-up and requests took ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)
  })
})
