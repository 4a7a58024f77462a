/**
 * What one request may cost the event loop: bodies no route could accept
 * (tens of thousands of keys or items, deep nesting, long strings) are
 * refused from their shape as they arrive, a 1 MiB body that fits is parsed
 * in one bounded pass, and an answer lists at most 10 field errors. Every
 * route's body schema fits the shape the parser lets through.
 */
import { Readable } from 'node:stream'
import type { TSchema } from '@sinclair/typebox'
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import app from '../../src/http/app.js'
import { JSON_BODY_BOUNDS, JsonShape, type JsonBodyBounds } from '../../src/http/jsonBody.js'
import { createFastify } from '../../src/http/fastifyOptions.js'
import { MAX_FIELD_ERRORS } from '../../src/schemas/validation.js'
import { buildTestApp } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('request shapes refused before any handler')

/** What one read off a socket gives at most. */
const CHUNK = 64 * 1024

/**
 * How many times JSON.parse was handed a text of `minLength` characters or
 * more while `request` ran: the work a refusal by shape saves (parsing such a
 * body, then Ajv and the error listing walking it, is what costs seconds).
 * The work done is asserted, not how long it took: a busy machine changes
 * the second, never the first.
 */
async function bigParsesDuring(request: () => Promise<unknown>, minLength: number): Promise<number> {
  const parse = JSON.parse
  let parses = 0
  JSON.parse = function countingParse(this: unknown, text: string, reviver?: Parameters<typeof JSON.parse>[1]) {
    if (typeof text === 'string' && text.length >= minLength) parses++
    return parse.call(this, text, reviver) as unknown
  }
  try {
    await request()
  } finally {
    JSON.parse = parse
  }
  return parses
}

type Json = Record<string, unknown>

function manyKeys(count: number): Json {
  const keys: Json = {}
  for (let i = 0; i < count; i++) keys[`k${i}`] = i
  return keys
}

function nested(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`
}

t.test('request cost', async (t) => {
  const ta = await buildTestApp(t)

  // The body arrives as a socket delivers it, in chunks of 64 KB, cut once: only the request is measured.
  const send = (url: string, body: string, token: string | null = ta.rootToken) => {
    const bytes = Buffer.from(body)
    const chunks = Array.from({ length: Math.ceil(bytes.length / CHUNK) }, (_, i) => bytes.subarray(i * CHUNK, (i + 1) * CHUNK))
    const headers = {
      'content-type': 'application/json',
      'content-length': String(bytes.length),
      ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
    }
    return Object.assign(() => ta.app.inject({ method: 'POST', url, payload: Readable.from(chunks), headers }), { bodyLength: bytes.length })
  }

  /** `parses`: how often the body itself may be parsed, 0 when its shape or length refuses it, 1 when it fits and is validated. */
  async function expectCheapRefusal(t: Test, name: string, request: (() => Promise<LightMyRequestResponse>) & { bodyLength: number }, status: number, code: string, parses: 0 | 1 = 0) {
    const res = await request()
    t.equal(res.statusCode, status, `${name}: status ${status}`)
    const body = res.json<{ response_code: string; errors?: unknown[] }>()
    t.equal(body.response_code, code, `${name}: response_code ${code}`)
    t.same(errorShapeProblems(res), [], `${name}: the error envelope`)
    t.ok((body.errors ?? []).length <= MAX_FIELD_ERRORS, `${name}: at most ${MAX_FIELD_ERRORS} errors (${body.errors?.length ?? 0})`)
    t.ok(res.body.length < 2048, `${name}: a short answer (${res.body.length} bytes)`)
    t.equal(await bigParsesDuring(request, request.bodyLength / 2), parses, `${name}: ${parses === 0 ? 'refused without parsing the body' : 'the body parsed once'}`)
    return body
  }

  const login = (data: Json, extra: Json = {}) => JSON.stringify({ command: 'login', data, ...extra })
  const batch = (checks: unknown[]) => JSON.stringify({ command: 'check-batch', data: { checks } })

  t.test('bodies no route could accept: a 400 100 naming the body, decided before parsing', async (t) => {
    const unknownKeys = login({ email: 'a@example.com', password: 'x' }, manyKeys(60_000))
    t.ok(unknownKeys.length > 600_000, 'the login body is over 600 KB')
    const loginKeys = await expectCheapRefusal(t, 'login with 60,000 unknown keys', send('/v2/auth/login', unknownKeys, null), 400, '100')
    t.same(loginKeys.errors, [{ field: 'body', message: 'holds more values than any valid request' }])

    const inData = login({ email: 'a@example.com', password: 'x', ...manyKeys(60_000) })
    await expectCheapRefusal(t, 'login with 60,000 unknown keys in data', send('/v2/auth/login', inData, null), 400, '100')

    const empties = batch(Array.from({ length: 100_000 }, () => ({})))
    await expectCheapRefusal(t, 'check-batch of 100,000 {}', send('/v2/authz/check-batch', empties), 400, '100')

    const deep = `{"command":"login","data":${'['.repeat(400_000)}${']'.repeat(400_000)}}`
    const deepBody = await expectCheapRefusal(t, 'a body nested 400,000 deep', send('/v2/auth/login', deep, null), 400, '100')
    t.same(deepBody.errors, [{ field: 'body', message: 'is nested deeper than any valid request' }])
    const deepInKey = `{"command":"login","data":{"email":"a@example.com","password":"x","x":${nested(50_000)}}}`
    await expectCheapRefusal(t, 'an unknown key nesting 50,000 objects', send('/v2/auth/login', deepInKey, null), 400, '100')

    const longString = login({ email: `${'a'.repeat(1_000_000)}@example.com`, password: 'x' })
    const long = await expectCheapRefusal(t, 'a 1 MB e-mail address', send('/v2/auth/login', longString, null), 400, '100')
    t.same(long.errors, [{ field: 'body', message: 'holds a text longer than any valid request' }])

    const es = await ta.app.inject({
      method: 'POST',
      url: '/v2/auth/login?lang=es',
      payload: unknownKeys,
      headers: { 'content-type': 'application/json' },
    })
    t.same(es.json().errors, [{ field: 'body', message: 'contiene más valores que cualquier solicitud válida' }], 'localised')
  })

  t.test('a body over the 1 MiB limit: 413 600 from its length alone', async (t) => {
    const valid = batch(Array.from({ length: 100_000 }, () => ({ obj: 'orders', act: 'read' })))
    t.ok(valid.length > 1024 * 1024)
    await expectCheapRefusal(t, 'check-batch of 100,000 valid checks', send('/v2/authz/check-batch', valid), 413, '600')
  })

  t.test('bodies that fit the shape: parsed once and validated, at most 10 errors listed', async (t) => {
    // 1 MiB in 250 strings of 4,000 characters: as much as the shape lets through, all of it parsed.
    const padded = login({ email: 'a@example.com', password: 'x', pad: Array.from({ length: 250 }, () => 'p'.repeat(4000)) })
    t.ok(padded.length > 1_000_000 && padded.length < 1024 * 1024, `a body of ${padded.length} bytes`)
    const pad = await expectCheapRefusal(t, 'a 1 MiB body within the shape', send('/v2/auth/login', padded, null), 400, '100', 1)
    t.same(pad.errors, [{ field: 'pad', message: 'is not a known field' }], 'validated after parsing')

    const whitespace = `${' '.repeat(1_000_000)}${login({ email: 'a@example.com', password: 'x', extra: 1 })}`
    await expectCheapRefusal(t, '1 MB of whitespace', send('/v2/auth/login', whitespace, null), 400, '100', 1)

    const unknown = login({ email: 'a@example.com', password: 'x', ...manyKeys(1000) })
    const many = await expectCheapRefusal(t, 'login with 1,000 unknown keys in data', send('/v2/auth/login', unknown, null), 400, '100', 1)
    t.equal(many.errors?.length, MAX_FIELD_ERRORS, 'the first 10 are listed')
    t.same(many.errors?.[0], { field: 'k0', message: 'is not a known field' })

    const bad = batch(Array.from({ length: 100 }, () => ({ obj: 'Not Valid!', act: 7, extra: true })))
    const items = await expectCheapRefusal(t, 'check-batch of 100 invalid checks', send('/v2/authz/check-batch', bad), 400, '100', 1)
    t.equal(items.errors?.length, MAX_FIELD_ERRORS)

    const tooMany = batch(Array.from({ length: 101 }, () => ({ obj: 'orders', act: 'read' })))
    const over = await expectCheapRefusal(t, 'check-batch of 101 checks', send('/v2/authz/check-batch', tooMany), 400, '100', 1)
    t.same(over.errors, [{ field: 'checks', message: 'must have at most 100 items' }])

    const mismatch = JSON.stringify({ command: 'nope', data: { email: 'a@example.com', password: 'x', ...manyKeys(500) } })
    const wrong = await send('/v2/auth/login', mismatch, null)()
    t.equal(wrong.json().response_code, '102', 'a command that does not match is still named first, whatever else is wrong')

  })

  t.test('the valid bodies still pass', async (t) => {
    const full = batch(Array.from({ length: 100 }, (_, i) => ({ obj: 'orders', act: i % 2 === 0 ? 'read' : 'refund', domain: 'global' })))
    const res = await send('/v2/authz/check-batch', full)()
    t.equal(res.statusCode, 200, res.body.slice(0, 200))
    t.equal(res.json().data.results.length, 100)
    const ok = await send('/v2/auth/login', login({ email: 'root@example.com', password: 'root-password-123' }), null)()
    t.equal(ok.statusCode, 200, 'login')
  })
})

/** How much of JSON_BODY_BOUNDS the largest body a schema accepts takes; Infinity where it is unbounded. */
function schemaCost(schema: TSchema): { values: number; depth: number; stringBytes: number } {
  const members = (schema.anyOf ?? schema.oneOf ?? schema.allOf) as TSchema[] | undefined
  if (members !== undefined) {
    const costs = members.map(schemaCost)
    return {
      values: Math.max(...costs.map((c) => c.values)),
      depth: Math.max(...costs.map((c) => c.depth)),
      stringBytes: Math.max(...costs.map((c) => c.stringBytes)),
    }
  }
  if (schema.type === 'object') {
    if (schema.additionalProperties !== false) return { values: Infinity, depth: Infinity, stringBytes: Infinity }
    const children = Object.values((schema.properties ?? {}) as Record<string, TSchema>).map(schemaCost)
    return {
      values: 1 + children.length + children.reduce((sum, c) => sum + c.values, 0),
      depth: 1 + Math.max(0, ...children.map((c) => c.depth)),
      stringBytes: Math.max(0, ...children.map((c) => c.stringBytes)),
    }
  }
  if (schema.type === 'array') {
    const max = typeof schema.maxItems === 'number' ? schema.maxItems : Infinity
    const item = schemaCost(schema.items as TSchema)
    return { values: 1 + max + max * item.values, depth: 1 + item.depth, stringBytes: item.stringBytes }
  }
  if (schema.type === 'string') {
    // Key names are short; a value's characters may each be sent as a six-byte \uXXXX escape.
    const length = typeof schema.maxLength === 'number' ? schema.maxLength : typeof schema.pattern === 'string' || 'const' in schema ? 128 : Infinity
    return { values: 0, depth: 0, stringBytes: 6 * length }
  }
  return { values: 0, depth: 0, stringBytes: 0 }
}

t.test('every body schema fits what the parser lets through', async (t) => {
  const ta = await buildTestApp(t)
  const fastify = createFastify(ta.service.config)
  const bodies: Array<[string, TSchema, JsonBodyBounds]> = []
  fastify.addHook('onRoute', (route) => {
    const body = route.schema?.body as TSchema | undefined
    // A route past the common bounds (a list of a thousand changes) names its own, which its schema must fit as well.
    if (body !== undefined) bodies.push([`${String(route.method)} ${route.url}`, body, route.config?.bodyBounds ?? JSON_BODY_BOUNDS])
  })
  await fastify.register(app, { service: ta.service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  t.ok(bodies.length >= 10, `${bodies.length} routes take a body`)
  for (const [route, schema, bounds] of bodies) {
    const cost = schemaCost(schema)
    t.ok(cost.values <= bounds.maxValues, `${route}: at most ${cost.values} values`)
    t.ok(cost.depth <= bounds.maxDepth, `${route}: at most ${cost.depth} deep`)
    t.ok(cost.stringBytes <= bounds.maxStringBytes, `${route}: strings of at most ${cost.stringBytes} bytes`)
  }
})

t.test('the shape is followed across chunks, strings and escapes included', async (t) => {
  const feed = (...chunks: string[]) => {
    const shape = new JsonShape()
    for (const chunk of chunks) {
      const exceeded = shape.feed(Buffer.from(chunk))
      if (exceeded !== null) return exceeded
    }
    return null
  }
  const { maxValues, maxDepth, maxStringBytes } = JSON_BODY_BOUNDS
  t.equal(feed(JSON.stringify({ a: Array.from({ length: maxValues - 2 }, () => 1) })), null, 'as many values as allowed')
  t.equal(feed(JSON.stringify({ a: Array.from({ length: maxValues }, () => 1) })), 'too_many_values')
  t.equal(feed(JSON.stringify({ a: ','.repeat(4000) })), null, 'commas inside a string are text')
  t.equal(feed(JSON.stringify({ a: '[{'.repeat(1000) })), null, 'and so are brackets')
  t.equal(feed(JSON.stringify({ a: 'x\\"[['.repeat(500) })), null, 'escaped quotes do not end the string')
  t.equal(feed('{"a":"', 'x'.repeat(maxStringBytes - 2), '\\', '"', '"}'), null, 'an escape split across chunks')
  t.equal(feed('{"a":"', 'x'.repeat(maxStringBytes + 1), '"}'), 'string_too_long')
  t.equal(feed(`"${'x'.repeat(maxStringBytes)}"`), null, 'a string of exactly the limit')
  t.equal(feed('['.repeat(maxDepth), ']'.repeat(maxDepth)), null, `${maxDepth} deep`)
  t.equal(feed('['.repeat(maxDepth + 1)), 'too_deep')
  t.equal(feed('[]'.repeat(maxDepth * 10)), null, 'depth goes back down')
})
