import t from 'tap'
import { readFileSync } from 'node:fs'
import type { HTTPMethods } from 'fastify'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/fastifyOptions.js'
import { ROOT_EMAIL, buildTestService } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('request shapes: query parameters')

/** A query parameter a route does not declare is refused with 400 `100` naming it, on every route. */

interface Operation {
  parameters?: Array<{ name: string; in: string; example?: unknown; schema?: { examples?: unknown[] } }>
  requestBody?: { content: Record<string, { example?: unknown }> }
}
const es = JSON.parse(readFileSync(new URL('../../src/i18n/es.json', import.meta.url), 'utf8')) as { errors: Record<string, string> }
const doc = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as { paths: Record<string, Record<string, Operation>> }

const PARAMETER_VALUES: Record<string, string> = {
  userId: '3f0c4b7e-9a3b-4c7e-9d2a-1b2c3d4e5f60',
  subRoleCode: 'support_agent',
  '*': 'orders/1',
}

t.test('every route refuses a query parameter it does not declare', async (t) => {
  const service = await buildTestService(t)
  const fastify = createFastify(service.config)
  const routes: Array<{ method: string; url: string; foreignQuery: boolean }> = []
  fastify.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      routes.push({ method, url: route.url, foreignQuery: route.config?.foreignQuery === true })
    }
  })
  await fastify.register(app, { service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  const { rows } = await service.db.query<{ id: string }>('SELECT id::text AS id FROM admin_accounts WHERE lower(email) = lower($1)', [ROOT_EMAIL])
  const root = await service.accounts.get(rows[0]?.id ?? '')
  if (root === null || service.tokens === null) throw new Error('bootstrap made no root admin')
  const token = service.tokens.issue(root).access_token

  const checked = routes.filter((r) => r.method !== 'OPTIONS' && !r.foreignQuery)
  t.ok(checked.length >= 30, `${checked.length} routes`)
  for (const route of checked) {
    const path = route.url.replace(/:([A-Za-z0-9_]+)/g, (_m, name: string) => PARAMETER_VALUES[name] ?? 'x').replace('*', PARAMETER_VALUES['*'] ?? 'x')
    const operation = doc.paths[route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}')]?.[route.method.toLowerCase()]
    // A valid body, so that the query string is what the validator refuses.
    const body = operation?.requestBody?.content['application/json']?.example
    const res = await fastify.inject({
      method: route.method as HTTPMethods,
      url: `${path}?unknown_one=1&unknownTwo=2`,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    })
    const label = `${route.method} ${route.url}`
    t.equal(res.statusCode, 400, `${label}: 400`)
    if (route.method === 'HEAD') continue
    t.equal(res.json().response_code, '100', `${label}: response code 100`)
    const fields = (res.json().errors as Array<{ field: string }>).map((e) => e.field)
    t.ok(fields.includes('unknown_one') && fields.includes('unknownTwo'), `${label}: names both parameters (${fields.join(', ')})`)
  }

  const declared = await fastify.inject({ method: 'GET', url: '/v2/admin/accounts?page=1&lang=es', headers: { authorization: `Bearer ${token}` } })
  t.equal(declared.statusCode, 200, 'declared parameters still pass')

  // `lang` is every route's, declared or not: a refusal still comes in the asked locale.
  const ready = await fastify.inject({ method: 'GET', url: '/readyz?lang=es' })
  t.equal(ready.statusCode, 200, '/readyz takes lang')
  const login = await fastify.inject({
    method: 'POST',
    url: '/v2/auth/login?lang=es',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ command: 'login', data: { email: 'nobody@example.com', password: 'wrong-password' } }),
  })
  t.equal(login.statusCode, 401, 'a POST with lang reaches its command')
  t.equal(login.json().response_text, es.errors.BAD_CREDENTIALS, 'and answers in the asked locale')

  const foreign = routes.filter((r) => r.foreignQuery)
  t.ok(foreign.length > 0, 'the forward-auth prefix form is declared')
  for (const route of foreign) {
    const res = await fastify.inject({
      method: route.method as HTTPMethods,
      url: `${route.url.replace('*', 'orders/1')}?client_param=1`,
      headers: { authorization: `Bearer ${token}` },
    })
    t.not(res.statusCode, 400, `${route.method} ${route.url}: the client's own query passes through`)
  }
})
