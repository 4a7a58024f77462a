/**
 * The allowed ext_authz answer written by hand is the message protobufjs
 * writes for the same CheckResponse, byte for byte, and decodes to it.
 */
import t from 'tap'
import type { MethodDefinition } from '@grpc/grpc-js'
import { allowedAnswer } from '../../src/grpc/allowedAnswer.js'
import { withEncodedAnswers } from '../../src/grpc/wire.js'
import { loadServiceProtos } from '../../src/grpc/protos.js'

const check = loadServiceProtos().extAuthz.Check as MethodDefinition<unknown, unknown>
const header = (key: string, value: string) => ({ header: { key, value }, append_action: 2 })

/** The answer as an object, as the library encodes it. */
function asObject(userId: string, merchantId: string | null, decisionId: string) {
  return {
    status: { code: 0 },
    ok_response: {
      headers: [header('x-authz-user-id', userId), ...(merchantId === null ? [] : [header('x-authz-merchant-id', merchantId)]), header('x-decision-id', decisionId)],
      headers_to_remove: merchantId === null ? ['x-authz-merchant-id'] : [],
    },
  }
}

const CASES: Array<[string, string, string | null, string]> = [
  ['a merchant user', '0b6f4c1e-2f1a-4d7e-9c55-7a1f0e3b9d21', 'm1', '9f86d081884c7d65-1a'],
  ['a user of no merchant', '0b6f4c1e-2f1a-4d7e-9c55-7a1f0e3b9d21', null, '9f86d081884c7d65-zz'],
  // Over 127 bytes a length takes two bytes of varint, at every level.
  ['lengths over 127 bytes', 'u'.repeat(200), 'm'.repeat(130), 'd'.repeat(300)],
  ['multi-byte characters', 'ü-ñ', 'mé', 'd-€'],
  ['empty values', '', '', ''],
]

t.test('byte for byte what protobufjs writes', async (t) => {
  for (const [what, userId, merchantId, decisionId] of CASES) {
    const expected = check.responseSerialize(asObject(userId, merchantId, decisionId))
    const account = { id: userId, merchant_id: merchantId }
    t.same(allowedAnswer(account, decisionId).toString('hex'), expected.toString('hex'), what)
    t.same(check.responseDeserialize(allowedAnswer(account, decisionId)), check.responseDeserialize(expected), `${what}: decodes to the same message`)
  }
})

t.test('an account answered again: its identity as encoded before, or again when it changed', async (t) => {
  const account: { id: string; merchant_id: string | null } = { id: 'u-1', merchant_id: 'm1' }
  const first = allowedAnswer(account, 'd-1')
  t.same(allowedAnswer(account, 'd-22').toString('hex'), check.responseSerialize(asObject('u-1', 'm1', 'd-22')).toString('hex'), 'another decision id')
  account.merchant_id = null
  t.same(allowedAnswer(account, 'd-3').toString('hex'), check.responseSerialize(asObject('u-1', null, 'd-3')).toString('hex'), 'its merchant gone: the header removed instead')
  account.id = 'u-2'
  t.same(allowedAnswer(account, 'd-4').toString('hex'), check.responseSerialize(asObject('u-2', null, 'd-4')).toString('hex'), 'another id')
  t.same(allowedAnswer({ id: 'u-1', merchant_id: 'm1' }, 'd-1'), first, 'another object of the same account: the same bytes')
})

t.test('the definition sends an encoded answer as it is and encodes any other', async (t) => {
  const serialize = (withEncodedAnswers(loadServiceProtos().extAuthz, 'Check').Check as MethodDefinition<unknown, unknown>).responseSerialize
  const encoded = allowedAnswer({ id: 'u', merchant_id: 'm1' }, 'd-1')
  t.equal(serialize(encoded), encoded, 'a Buffer is the answer')
  const refusal = { status: { code: 7, message: 'no' } }
  t.same(serialize(refusal), check.responseSerialize(refusal), 'an object is encoded as before')
})
