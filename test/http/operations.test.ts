import t from 'tap'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/server.js'
import { buildTestApp, buildTestService } from '../helper.js'

t.test('health, readiness and the API document', async (t) => {
  const ta = await buildTestApp(t)
  const health = await ta.call({ method: 'GET', url: '/healthz', token: null })
  t.equal(health.statusCode, 200)
  t.equal(health.json().data.status, 'ok')
  const ready = await ta.call({ method: 'GET', url: '/readyz', token: null })
  t.equal(ready.statusCode, 200)

  const docs = await ta.call({ method: 'GET', url: '/docs', token: null })
  t.ok(docs.statusCode === 200 || docs.statusCode === 302, 'the docs UI needs no token')
  const spec = (await ta.call({ method: 'GET', url: '/docs/json', token: null })).json() as {
    openapi: string
    paths: Record<string, Record<string, { requestBody?: { content: Record<string, { examples?: unknown; example?: unknown; schema?: { examples?: unknown } }> }; security?: unknown }>>
    components: { securitySchemes: Record<string, unknown> }
  }
  t.match(spec.openapi, /^3\./)
  t.ok(spec.components.securitySchemes.bearerAuth, 'bearer scheme')
  const expected: Array<[string, string]> = [
    ['post', '/v2/auth/login'],
    ['get', '/v2/profile'],
    ['get', '/v2/profile/permissions'],
    ['post', '/v2/admin/register'],
    ['post', '/v2/admin/merchants'],
    ['post', '/v2/admin/permissions/roles/{subRoleCode}/grant'],
    ['delete', '/v2/admin/permissions/roles/{subRoleCode}/revoke'],
    ['post', '/v2/admin/permissions/users/{userId}/grant'],
    ['post', '/v2/admin/permissions/users/{userId}/deny'],
    ['delete', '/v2/admin/permissions/users/{userId}/revoke'],
    ['get', '/v2/admin/permissions/catalog'],
    ['get', '/v2/admin/permissions/roles/{subRoleCode}'],
    ['get', '/v2/admin/permissions/users/{userId}'],
    ['get', '/v2/admin/permissions/audit-log'],
    ['get', '/v2/authz/check'],
    ['post', '/v2/authz/check-batch'],
    ['get', '/healthz'],
    ['get', '/readyz'],
  ]
  for (const [method, path] of expected) {
    const operation = spec.paths[path]?.[method]
    t.ok(operation, `${method.toUpperCase()} ${path} is documented`)
    const body = operation?.requestBody?.content['application/json']
    if (body !== undefined) {
      const example = body.examples ?? body.example ?? body.schema?.examples
      t.ok(example, `${method.toUpperCase()} ${path} has an example`)
    }
  }
  const documented = Object.values(spec.paths).reduce((n, ops) => n + Object.keys(ops).length, 0)
  t.equal(documented, expected.length, 'and nothing else')
})

t.test('readiness fails when the database is gone', async (t) => {
  const service = await buildTestService(t)
  const ta = await buildTestApp(t, { service })
  await service.db.close()
  const res = await ta.call({ method: 'GET', url: '/readyz', token: null })
  t.equal(res.statusCode, 503)
  t.equal(res.json().response_code, '901')
})

t.test('every admin route declares a permission that is in the active catalog', async (t) => {
  const service = await buildTestService(t)
  const fastify = createFastify(service.config)
  const declared: Array<{ url: string; method: string; permission?: { obj: string; act: string }; public?: boolean }> = []
  fastify.addHook('onRoute', (route) => {
    declared.push({ url: route.url, method: String(route.method), permission: route.config?.permission, public: route.config?.public })
  })
  await fastify.register(app, { service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  const active = new Set(service.engine.catalogEntries().filter((e) => e.is_active).map((e) => `${e.obj}:${e.act}`))
  const admin = declared.filter((r) => r.url.startsWith('/v2/admin') && r.method !== 'HEAD')
  t.equal(new Set(admin.map((r) => `${r.method} ${r.url}`)).size, 11, 'all admin routes seen')
  for (const route of admin) {
    t.ok(route.permission !== undefined && active.has(`${route.permission.obj}:${route.permission.act}`), `${route.method} ${route.url}`)
  }
  t.ok(declared.find((r) => r.url === '/v2/auth/login')?.public, 'login is public')
})
