import type { FastifySchema } from 'fastify'
import t from 'tap'
import { DeferredCompiles } from '../../src/schemas/deferredCompile.js'
import { createValidatorCompiler } from '../../src/schemas/validation.js'

t.test('deferred work is done once: on first use or by drain, whichever comes first', async (t) => {
  const compiles = new DeferredCompiles()
  const made: string[] = []
  const a = compiles.defer(() => (made.push('a'), { name: 'a' }))
  const b = compiles.defer(() => (made.push('b'), { name: 'b' }))
  compiles.defer(() => made.push('c'))
  t.same(made, [], 'nothing is made when deferred')
  t.equal(compiles.size, 3)
  t.equal(a().name, 'a', 'the first use makes it')
  t.equal(a(), a(), 'and keeps what it made')
  t.same(made, ['a'])
  t.equal(compiles.size, 2, 'what was used waits no more')
  await compiles.drain()
  t.same(made, ['a', 'b', 'c'], 'drain makes the rest, each once')
  t.equal(compiles.size, 0)
  t.equal(b().name, 'b', 'a drained one is not made again')
  t.same(made, ['a', 'b', 'c'])
  await compiles.drain()
  t.same(made, ['a', 'b', 'c'], 'a second drain has nothing to do')
})

t.test('a route validator compiles when first asked, and validates as Ajv does', async (t) => {
  const compiler = createValidatorCompiler()
  const body = { type: 'object', properties: { n: { type: 'integer', maximum: 3 } }, required: ['n'], additionalProperties: false }
  const validate = compiler({ schema: body as FastifySchema, httpPart: 'body' })
  t.equal(validate({ n: 2 }), true)
  t.equal(validate.errors, null)
  t.equal(validate({ n: '2' }), false, 'a body is not coerced')
  t.equal(validate.errors?.[0]?.keyword, 'type')
  const querySchema = { type: 'object', properties: { n: { type: 'integer', default: 1 } } }
  const query = compiler({ schema: querySchema as FastifySchema, httpPart: 'querystring' })
  await compiler.compileDeferred()
  const parsed: Record<string, unknown> = { n: '2' }
  t.equal(query(parsed), true, 'a query string is coerced')
  t.equal(parsed.n, 2)
  t.ok(query.schemaEnv !== undefined, 'Fastify sees the schema environment')
  const defaults: Record<string, unknown> = {}
  t.equal(query(defaults), true)
  t.equal(defaults.n, 1, 'defaults are filled in')
})
