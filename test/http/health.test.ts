import t from 'tap'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/fastifyOptions.js'
import { ROOT_EMAIL, buildTestApp, buildTestService } from '../helper.js'
import { INTERNALS, errorShapeProblems } from '../support/envelope.js'

/** Health and readiness answer without a token; the OpenAPI document covers the whole API. */

interface Operation {
  security?: Array<Record<string, unknown>>
  requestBody?: { content?: Record<string, { schema?: { examples?: unknown[] }; examples?: unknown; example?: unknown }> }
}
interface OpenApi {
  openapi: string
  paths: Record<string, Record<string, Operation>>
  components?: { securitySchemes?: Record<string, { type?: string; scheme?: string }> }
}

interface DeclaredRoute {
  method: string
  url: string
  public: boolean
  body: boolean
}

t.test('health, readiness and the API document', async (t) => {
  const service = await buildTestService(t)
  // The routes as Fastify registers them, collected before the app is registered.
  const fastify = createFastify(service.config)
  const declared: DeclaredRoute[] = []
  fastify.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      // Hidden routes (/metrics for Prometheus, the prefix form of verify for Envoy) are documented in docs/operations.md instead.
      if (route.schema?.hide === true) continue
      declared.push({ method: method.toLowerCase(), url: route.url, public: route.config?.public === true, body: route.schema?.body !== undefined })
    }
  })
  await fastify.register(app, { service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  const root = (await service.db.query<{ id: string }>('SELECT id::text AS id FROM admin_accounts WHERE email = $1', [ROOT_EMAIL])).rows[0]
  const rootAccount = await service.accounts.get(root?.id ?? '')
  if (rootAccount === null || service.tokens === null) throw new Error('no root account')
  const rootToken = service.tokens.issue(rootAccount).access_token
  const get = (url: string, token?: string) => fastify.inject({ method: 'GET', url, headers: token !== undefined ? { authorization: `Bearer ${token}` } : {} })

  t.test('health and readiness need no token', async (t) => {
    const health = await get('/healthz')
    t.equal(health.statusCode, 200)
    t.same(health.json(), { response_code: '001', response_text: 'Success', data: { status: 'ok' } })
    const ready = await get('/readyz')
    t.equal(ready.statusCode, 200)
    t.same(ready.json(), { response_code: '001', response_text: 'Success', data: { status: 'ready' } })
    t.equal((await get('/healthz', 'not.a.token')).statusCode, 200, 'a bad token does not matter')
  })

  t.test('the docs need no token', async (t) => {
    const docs = await get('/docs')
    t.ok([200, 302].includes(docs.statusCode), `GET /docs answers ${docs.statusCode}`)
    const page = docs.statusCode === 302 ? await get(new URL(String(docs.headers.location), 'http://localhost/docs/').pathname) : docs
    t.equal(page.statusCode, 200, 'the UI page')
    t.match(page.headers['content-type'], /text\/html/)
    t.match(page.body, /swagger/i)
    const json = await get('/docs/json')
    t.equal(json.statusCode, 200, 'the document')
    t.match(json.headers['content-type'], /application\/json/)
  })

  t.test('the OpenAPI document lists every route', async (t) => {
    const spec = (await get('/docs/json')).json() as OpenApi
    t.match(spec.openapi, /^3\.\d+\.\d+$/, 'OpenAPI 3')
    t.match(spec.components?.securitySchemes?.bearerAuth, { type: 'http', scheme: 'bearer' }, 'the bearerAuth scheme')

    const api = declared.filter((r) => !r.url.startsWith('/docs') && r.method !== 'head')
    t.ok(api.length >= 18, `${api.length} routes registered`)
    const toOpenApi = (url: string) => url.replace(/:(\w+)/g, '{$1}')
    const expected = new Set(api.map((r) => `${r.method} ${toOpenApi(r.url)}`))
    const documented = new Set(Object.entries(spec.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)))
    t.same([...expected].filter((r) => !documented.has(r)), [], 'every route is documented')
    t.same([...documented].filter((r) => !expected.has(r)), [], 'and nothing else')
    for (const path of ['post /v2/auth/login', 'post /v2/admin/register', 'post /v2/admin/merchants', 'get /healthz', 'get /readyz', 'get /v2/profile']) {
      t.ok(documented.has(path), `${path} is documented`)
    }

    for (const route of api) {
      const operation = spec.paths[toOpenApi(route.url)]?.[route.method]
      const name = `${route.method.toUpperCase()} ${route.url}`
      const bearer = (operation?.security ?? []).some((s) => 'bearerAuth' in s)
      t.equal(bearer, !route.public, `${name}: ${route.public ? 'public' : 'declares bearerAuth'}`)
      if (!route.body) continue
      const content = operation?.requestBody?.content?.['application/json']
      const example = content?.schema?.examples?.[0] ?? content?.example
      t.ok(example !== undefined, `${name}: the request body has an example`)
      // The example is a real request: it passes the route's own validation.
      const res = await fastify.inject({
        method: route.method.toUpperCase() as 'POST' | 'DELETE',
        url: route.url.replace(':subRoleCode', 'example_role').replace(':userId', rootAccount.id),
        headers: { authorization: `Bearer ${rootToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify(example),
      })
      t.notOk(['100', '101', '102'].includes(String(res.json().response_code)), `${name}: the example is valid (${res.statusCode} ${res.json().response_code})`)
    }
    t.ok(api.filter((r) => r.body).length >= 8, 'command routes were checked')
  })

  t.test('readiness fails when the database is gone', async (t) => {
    const lost = await buildTestApp(t)
    t.equal((await lost.call({ method: 'GET', url: '/readyz', token: null })).statusCode, 200, 'ready while the database answers')
    await lost.service.db.close()
    const res = await lost.call({ method: 'GET', url: '/readyz', token: null })
    t.equal(res.statusCode, 503)
    t.equal(res.json().response_code, '901')
    t.same(errorShapeProblems(res), [])
    t.notMatch(res.body, INTERNALS)
    const health = await lost.call({ method: 'GET', url: '/healthz', token: null })
    t.equal(health.statusCode, 200, 'the process is still up')
  })
})
