import Fastify from 'fastify'
import t from 'tap'
import { createFastify } from '../../src/http/fastifyOptions.js'
import { answerRevision } from '../../src/http/serviceHeaders.js'
import { ConnectionDrain } from '../../src/http/shutdown.js'
import { kConnectionDrain, kFastPathSlot, kRevisionSlot } from '../../src/http/symbols.js'
import { testConfig } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the headers and instance state of Fastify instances; no database')

t.test("createFastify keeps the service's state on the instance under named symbols, seen by its plugins", async (t) => {
  const fastify = createFastify(testConfig())
  t.teardown(() => fastify.close())
  t.ok(fastify[kConnectionDrain] instanceof ConnectionDrain, 'the connection drain')
  t.ok(fastify[kFastPathSlot] !== undefined, 'the fast path slot')
  t.same(fastify[kRevisionSlot], { replica: null }, 'the revision slot, empty until the app names its replica')
  await fastify.register(async (child) => {
    t.equal(child[kConnectionDrain], fastify[kConnectionDrain], 'a plugin reads the same drain')
  })
  await fastify.ready()
})

t.test('a Fastify built otherwise gets every header of the service from the same writer', async (t) => {
  const bare = Fastify({ logger: false })
  t.teardown(() => bare.close())
  answerRevision(bare, { revisionText: '42' })
  bare.get('/probe', async () => 'ok')
  const res = await bare.inject({ method: 'GET', url: '/probe', headers: { 'x-request-id': 'probe-1' } })
  t.equal(res.headers['x-policy-revision'], '42')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  t.equal(res.headers['x-request-id'], 'probe-1', "the client's acceptable id")
})
