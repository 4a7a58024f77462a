/**
 * The shipped Caddy forward-auth recipe end to end: gateway/caddy/Caddyfile
 * (only its ports and admin endpoint changed) in front of an upstream that
 * echoes what reaches it, asking the compiled service, started with
 * gateway/routes.example.json as its route map. Between Caddy and the
 * service sits a recorder that passes everything through and notes each
 * sub-request, so the test can also show what Caddy sends the service.
 *
 * Besides what the nginx test shows, it proves the three holes of
 * forward_auth used as documented closed: the client's query reaching the
 * service, the client's X-Authz-* and X-Original-* headers reaching it, and a
 * client's identity header left in place when the answer lacks it.
 *
 * The test never installs Caddy (the CI script does): without a caddy
 * binary it is skipped, saying so.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { tempDir } from '../helper.js'
import { bearer, binaryOrReason, command, gatewayWorld, MERCHANT, sharedGatewayTests, startProxy, type Seen, type Teardown } from '../support/gateway.js'
import { sendRaw as send } from '../support/rawRequest.js'
import { freePort, repositoryRoot } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the Caddy gateway in front of the service')

const CADDYFILE = join(repositoryRoot, 'gateway', 'caddy', 'Caddyfile')

/**
 * The shipped Caddyfile with the test's ports, listening on the loopback
 * only, and without the admin endpoint (its fixed port could be taken). Each
 * change must find its line, so a changed recipe fails here rather than being
 * tested in some other form.
 */
function caddyConfig(shipped: string, ports: { caddy: number; app: number; authz: number }): string {
  let text = shipped
  const replace = (pattern: RegExp, by: string) => {
    if (!pattern.test(text)) throw new Error(`gateway/caddy/Caddyfile no longer has ${pattern}`)
    text = text.replace(pattern, by)
  }
  replace(/^\tadmin localhost:2019$/m, '\tadmin off')
  replace(/^:8000 \{$/m, `:${ports.caddy} {\n\tbind 127.0.0.1`)
  replace(/\bforward_auth 127\.0\.0\.1:3000 \{/, `forward_auth 127.0.0.1:${ports.authz} {`)
  replace(/\breverse_proxy 127\.0\.0\.1:8080$/m, `reverse_proxy 127.0.0.1:${ports.app}`)
  return text
}

async function startCaddy(t: Teardown, binary: string, config: string, home: string, port: number): Promise<{ output: () => string }> {
  const file = join(home, 'Caddyfile')
  writeFileSync(file, config)
  // Caddy keeps its autosaved configuration and certificate storage under the home folder: a private one.
  const env = { PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_DATA_HOME: join(home, 'data') }
  // SIGTERM: Caddy's graceful stop.
  return startProxy(t, { binary, args: ['run', '--config', file, '--adapter', 'caddyfile'], port, stop: 'SIGTERM', log: () => '', env })
}

/**
 * A request target as Caddy passes it on, upstream and in X-Original-URI
 * alike: Go's URL parser keeps the client's escapes, except that a target
 * holding a character a path may not carry unescaped (a backslash, a `#`,
 * which in a request target is no fragment) is escaped again from its
 * decoded form. Of the ambiguous forms only these two change.
 */
const asCaddyPassesIt = (target: string) => target.replaceAll('\\', '%5C').replaceAll('#', '%23')

const caddy = await binaryOrReason('caddy', ['/usr/bin/caddy', '/usr/local/bin/caddy'])

t.test('Caddy forward_auth with the shipped Caddyfile and route map', { skip: 'reason' in caddy ? caddy.reason : false, timeout: 170_000 }, async (t) => {
  if ('reason' in caddy) return
  const startedAt = Date.now()
  const world = await gatewayWorld(t)
  const { service, root, rootId, clerk, clerkToken, upstream, recorder } = world
  const port = await freePort()
  const config = caddyConfig(readFileSync(CADDYFILE, 'utf8'), { caddy: port, app: upstream.port, authz: recorder.port })
  const proxy = await startCaddy(t, caddy.path, config, tempDir(t, 'aps-caddy-'), port)
  const reached = () => upstream.seen.length
  const lastSubRequest = () => recorder.subRequests.at(-1)
  const responseCode = (body: string) => (JSON.parse(body) as { response_code?: string }).response_code

  sharedGatewayTests(t, 'Caddy', port, world, asCaddyPassesIt)

  t.test("Caddy passes the service's envelope on, and re-escapes a target as it does upstream", async (t) => {
    const denied = await send(port, 'POST', '/api/orders/42/refund', bearer(clerkToken))
    t.equal(denied.status, 403, 'denied')
    t.equal(responseCode(denied.body), '300', "with the service's envelope")
    const none = await send(port, 'GET', '/api/orders/42')
    t.equal(none.status, 401, 'no token')
    t.ok(responseCode(none.body), "with the service's envelope")

    const escapedAgain = await send(port, 'GET', '/api/orders/{42}', bearer(clerkToken))
    t.equal(escapedAgain.status, 200, 'a target Go escapes again is allowed')
    t.equal((JSON.parse(escapedAgain.body) as Seen).url, '/api/orders/%7B42%7D', 'and reaches the upstream escaped')
    t.equal(lastSubRequest()?.headers['x-original-uri'], '/api/orders/%7B42%7D', 'in the form the service judged')
  })

  t.test("the client's query does not reach the service", async (t) => {
    const named = { 'x-original-method': 'POST', 'x-original-uri': '/api/orders/42/refund' }
    const direct = await fetch(`${service.base}/v2/authz/verify?obj=orders&act=read`, { headers: { ...bearer(clerkToken), ...named } })
    t.equal(direct.status, 204, 'asked directly, the service takes the pair the query names (so passing the query on would let it through)')

    const before = reached()
    const res = await send(port, 'POST', '/api/orders/42/refund?obj=orders&act=read', bearer(clerkToken))
    t.equal(res.status, 403, 'through Caddy, still the refund the route map names')
    t.equal(reached(), before, 'the upstream never saw it')
    t.equal(lastSubRequest()?.url, '/v2/authz/verify', 'the sub-request has no query')
    t.equal(lastSubRequest()?.headers['x-original-uri'], '/api/orders/42/refund?obj=orders&act=read', 'the query only in X-Original-URI, which the map ignores')
  })

  t.test("a client's X-Authz-* and X-Original-* headers reach neither the service nor the upstream", async (t) => {
    const direct = await fetch(`${service.base}/v2/authz/verify`, { headers: { ...bearer(clerkToken), 'x-authz-obj': 'orders', 'x-authz-act': 'read' } })
    t.equal(direct.status, 204, 'asked directly, the service takes the pair the headers name')

    const forged = {
      ...bearer(clerkToken),
      'x-authz-obj': 'orders',
      'x-authz-act': 'read',
      'x-authz-domain': MERCHANT,
      'x-original-method': 'GET',
      'x-original-uri': '/api/orders',
      'x-forwarded-method': 'GET',
      'x-forwarded-uri': '/api/orders',
    }
    const before = reached()
    t.equal((await send(port, 'POST', '/api/orders/42/refund', forged)).status, 403, 'still the refund the route map names')
    t.equal(reached(), before, 'the upstream never saw it')
    const sub = lastSubRequest()
    t.equal(sub?.headers['x-authz-obj'], undefined, 'X-Authz-Obj is not passed on')
    t.equal(sub?.headers['x-authz-act'], undefined, 'X-Authz-Act is not passed on')
    t.equal(sub?.headers['x-authz-domain'], undefined, 'X-Authz-Domain is not passed on')
    t.equal(sub?.headers['x-original-method'], 'POST', "Caddy's X-Original-Method, not the client's")
    t.equal(sub?.headers['x-original-uri'], '/api/orders/42/refund', "Caddy's X-Original-URI, not the client's")
    t.equal(sub?.headers['x-forwarded-uri'], '/api/orders/42/refund', "Caddy's X-Forwarded-Uri, not the client's")

    const allowed = await send(port, 'GET', '/api/orders/42', forged)
    t.equal(allowed.status, 200, 'an allowed request with the same headers passes')
    const seen = JSON.parse(allowed.body) as Seen
    t.equal(seen.headers['x-authz-obj'], undefined, 'the upstream gets no X-Authz-Obj')
    t.equal(seen.headers['x-original-uri'], undefined, "nor the client's X-Original-URI")
  })

  t.test("a client's identity header does not survive when the answer lacks it", async (t) => {
    const res = await send(port, 'GET', '/api/reports/daily', { ...bearer(root), 'x-authz-user-id': clerk.id, 'x-authz-merchant-id': 'm-2002' })
    t.equal(res.status, 200, 'the system owner may read reports')
    const seen = JSON.parse(res.body) as Seen
    t.equal(seen.user_id, rootId, "the upstream sees the caller's id, not the forged one")
    t.equal(seen.merchant_id, null, 'and no merchant for a system-owner user, neither the forged one nor a placeholder')
    t.equal(lastSubRequest()?.headers['x-authz-user-id'], undefined, 'the forged id never reached the service either')
  })

  t.test('a revoke blocks the next request', async (t) => {
    t.equal((await send(port, 'GET', '/api/products/7', bearer(clerkToken))).status, 200, 'allowed before')
    await command(service.base, '/v2/admin/permissions/roles/clerk/revoke', root, 'revoke-role-permission', { obj: 'products', act: 'read', domain: MERCHANT }, 'DELETE')
    const before = reached()
    t.equal((await send(port, 'GET', '/api/products/7', bearer(clerkToken))).status, 403, 'the very next request is refused')
    t.equal(reached(), before, 'and never reaches the upstream')
  })

  t.test('every sub-request went to the verify route', async (t) => {
    t.ok(recorder.subRequests.length >= 10, 'one sub-request per request')
    t.same([...new Set(recorder.subRequests.map((s) => `${s.method} ${s.url}`))], ['GET /v2/authz/verify'], 'all GET /v2/authz/verify')
    t.notMatch(proxy.output(), /"level":"(error|panic|fatal)"|panic serving/, "nothing serious in Caddy's log", { log: proxy.output() })
    t.comment(`set-up and requests took ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)
  })
})
