import t from 'tap'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/fastifyOptions.js'
import { buildTestService } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('route declarations against the catalog')

t.test('every admin route declares a permission that is in the active catalog', async (t) => {
  const service = await buildTestService(t)
  const fastify = createFastify(service.config)
  const declared: Array<{ url: string; method: string; permissions: Array<{ obj: string; act: string }>; public?: boolean }> = []
  fastify.addHook('onRoute', (route) => {
    // A route whose body says what it needs (apply-permission-changes) declares the permissions one of which lets a caller past the guard.
    const permissions = route.config?.permission !== undefined ? [route.config.permission] : [...(route.config?.anyPermission ?? [])]
    declared.push({ url: route.url, method: String(route.method), permissions, public: route.config?.public })
  })
  await fastify.register(app, { service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  const active = new Set(service.engine.catalogEntries().filter((e) => e.is_active).map((e) => `${e.obj}:${e.act}`))
  const admin = declared.filter((r) => r.url.startsWith('/v2/admin') && r.method !== 'HEAD')
  t.equal(new Set(admin.map((r) => `${r.method} ${r.url}`)).size, 27, 'all admin routes seen')
  for (const route of admin) {
    t.ok(route.permissions.length > 0 && route.permissions.every((p) => active.has(`${p.obj}:${p.act}`)), `${route.method} ${route.url}`)
  }
  t.ok(declared.find((r) => r.url === '/v2/auth/login')?.public, 'login is public')
})

t.test('a route requiring a platform pair refuses merchant callers, so no merchant user can ever use the pair', async (t) => {
  const service = await buildTestService(t)
  const fastify = createFastify(service.config)
  const declared: Array<{ route: string; permission?: { obj: string; act: string }; principalTypes?: readonly string[] }> = []
  fastify.addHook('onRoute', (route) => {
    declared.push({ route: `${String(route.method)} ${route.url}`, permission: route.config?.permission, principalTypes: route.config?.principalTypes })
  })
  await fastify.register(app, { service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  const platform = new Set(service.engine.catalogEntries().filter((e) => e.scope === 'platform').map((e) => `${e.obj}:${e.act}`))
  t.ok(platform.has('merchant:onboard'), 'merchant:onboard is a platform pair')
  const requiring = declared.filter((r) => r.permission !== undefined && platform.has(`${r.permission.obj}:${r.permission.act}`))
  t.ok(requiring.length > 0, 'some route requires one')
  for (const r of requiring) t.same(r.principalTypes, ['system_owner'], `${r.route}: system owners only`)
})
