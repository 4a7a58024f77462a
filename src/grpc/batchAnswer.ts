import type { CheckResult } from '../commands/permissionQueries.js'
import { delimited, WireWriter } from './wire.js'

/**
 * aps.authz.v1's CheckBatchResponse written straight in protobuf's wire
 * format: the bytes protobufjs writes for `{ results, decision_id }`
 * (every CheckResult's four fields, `allowed` false included, as it writes
 * them), without a message object per result and the field-by-field
 * encoding of up to a hundred of them (the service is registered
 * withEncodedAnswers, wire.ts). test/grpc/batchAnswer.test.ts compares the
 * two byte for byte. Field numbers: proto/aps/authz/v1/authz.proto.
 */

/** CheckBatchResponse.results (1) and .decision_id (2); CheckResult.obj (1), .act (2), .domain (3): length-delimited. */
const RESULTS = 0x0a
const DECISION_ID = 0x12
const OBJ = 0x0a
const ACT = 0x12
const DOMAIN = 0x1a
/** CheckResult.allowed (4), a varint. */
const ALLOWED = 0x20

export function batchAnswer(results: readonly CheckResult[], decisionId: string): Buffer {
  // Three byte lengths and the result's own length per result, measured once for both passes.
  const lengths = new Int32Array(results.length * 4)
  const idLength = Buffer.byteLength(decisionId)
  let size = delimited(idLength)
  for (let i = 0, l = 0; i < results.length; i++, l += 4) {
    const r = results[i] as CheckResult
    const obj = (lengths[l] = Buffer.byteLength(r.obj))
    const act = (lengths[l + 1] = Buffer.byteLength(r.act))
    const domain = (lengths[l + 2] = Buffer.byteLength(r.domain))
    const inner = (lengths[l + 3] = delimited(obj) + delimited(act) + delimited(domain) + 2)
    size += delimited(inner)
  }
  const w = new WireWriter(size)
  for (let i = 0, l = 0; i < results.length; i++, l += 4) {
    const r = results[i] as CheckResult
    w.open(RESULTS, lengths[l + 3] as number)
    w.text(OBJ, r.obj, lengths[l] as number)
    w.text(ACT, r.act, lengths[l + 1] as number)
    w.text(DOMAIN, r.domain, lengths[l + 2] as number)
    w.byte(ALLOWED)
    w.byte(r.allowed ? 1 : 0)
  }
  w.text(DECISION_ID, decisionId, idLength)
  return w.buffer
}
