/**
 * CheckBatch's answer written by hand is the message protobufjs writes for
 * the same CheckBatchResponse, byte for byte, and decodes to it.
 */
import t from 'tap'
import type { MethodDefinition } from '@grpc/grpc-js'
import { batchAnswer } from '../../src/grpc/batchAnswer.js'
import { loadServiceProtos } from '../../src/grpc/protos.js'
import { withEncodedAnswers } from '../../src/grpc/wire.js'

const checkBatch = loadServiceProtos().authz.CheckBatch as MethodDefinition<unknown, unknown>

const result = (i: number, domain = 'm1') => ({ obj: i % 2 === 0 ? 'orders' : 'payouts', act: i % 3 === 0 ? 'read' : 'approve', domain, allowed: i % 5 !== 0 })

const CASES: Array<[string, Array<ReturnType<typeof result>>, string]> = [
  ['one allowed result', [result(1)], 'f00d-1'],
  ['one denied result (allowed false is written)', [result(0)], 'f00d-2'],
  ['a hundred results, some denied', Array.from({ length: 100 }, (_, i) => result(i)), '9f86d081884c7d65-1a'],
  // Over 127 bytes a length takes two bytes of varint.
  ['values over 127 bytes', [{ obj: 'o'.repeat(140), act: 'a'.repeat(200), domain: 'd'.repeat(300), allowed: true }], 'i'.repeat(150)],
  ['multi-byte characters and empty values', [{ obj: 'ü', act: '', domain: '€', allowed: false }], ''],
  ['no results', [], 'f00d-3'],
]

t.test('byte for byte what protobufjs writes', async (t) => {
  for (const [what, results, id] of CASES) {
    const expected = checkBatch.responseSerialize({ results, decision_id: id })
    t.same(batchAnswer(results, id).toString('hex'), expected.toString('hex'), what)
    t.same(checkBatch.responseDeserialize(batchAnswer(results, id)), checkBatch.responseDeserialize(expected), `${what}: decodes to the same message`)
  }
})

t.test('the definition sends the encoded answer as it is', async (t) => {
  const serialize = (withEncodedAnswers(loadServiceProtos().authz, 'CheckBatch').CheckBatch as MethodDefinition<unknown, unknown>).responseSerialize
  const encoded = batchAnswer([result(1)], 'd-1')
  t.equal(serialize(encoded), encoded)
})
