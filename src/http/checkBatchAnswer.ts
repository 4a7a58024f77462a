import type { Account } from '../domain/principals.js'
import type { CheckContext, OnDecision } from '../commands/permissionQueries.js'
import { allows } from '../engine/explain.js'
import { MAX_BATCH_CHECKS, SPAN_FIELDS } from './plainBatch.js'

const bytes = (text: string) => Buffer.from(text, 'latin1')
const HEAD = bytes('{"response_code":"001","response_text":"Success","data":{"results":[')
const TAIL = bytes(']}}')
const OBJ = bytes('{"obj":"')
const ACT = bytes('","act":"')
const DOMAIN = bytes('","domain":"')
const ALLOWED = bytes('","allowed":true}')
const DENIED = bytes('","allowed":false}')

/** Each check's decision, between the two passes (answers are written synchronously, one at a time). */
const decided = new Uint8Array(MAX_BATCH_CHECKS)

/** Copies `from[start, end)` to `into` at `at`; the position after. A loop: the runs are a few bytes long. */
function put(into: Uint8Array, at: number, from: Uint8Array, start = 0, end = from.length): number {
  let i = at
  for (let k = start; k < end; k++) into[i++] = from[k] as number
  return i
}

export interface BatchAnswer {
  /** The route's 200 body, byte for byte. */
  body: Buffer
  allowed: number
}

/**
 * check-batch's answer to checks read by readPlainBatch: each decided as
 * checkPermissions decides it (permissionQueries.ts: the subject's home
 * domain unless one is given), written as the route's serialiser writes
 * them: CheckResultItem's properties in its order. The values are the
 * request's own bytes (ASCII, nothing to escape, as their patterns say);
 * `home` must be as plain (the caller checks it against DOMAIN_PATTERN).
 */
export function checkBatchAnswer(
  ctx: CheckContext,
  subject: Account,
  home: string,
  source: Buffer,
  spans: Int32Array,
  count: number,
  onDecision?: OnDecision,
): BatchAnswer {
  const homeBytes = bytes(home)
  // One character per byte: the values are sliced from it, not decoded one by one.
  const text = source.toString('latin1')
  let length = HEAD.length + TAIL.length + count - 1
  let allowed = 0
  for (let c = 0, s = 0; c < count; c++, s += SPAN_FIELDS) {
    const objAt = spans[s] as number
    const objEnd = spans[s + 1] as number
    const actAt = spans[s + 2] as number
    const actEnd = spans[s + 3] as number
    const domainAt = spans[s + 4] as number
    const domainEnd = spans[s + 5] as number
    const domain = domainAt < 0 ? home : text.slice(domainAt, domainEnd)
    const obj = text.slice(objAt, objEnd)
    const act = text.slice(actAt, actEnd)
    const code = ctx.engine.decision(subject, domain, obj, act)
    onDecision?.(c, domain, obj, act, code)
    const yes = allows(code)
    decided[c] = yes ? 1 : 0
    if (yes) allowed++
    length += OBJ.length + (objEnd - objAt) + ACT.length + (actEnd - actAt) + DOMAIN.length
    length += (domainAt < 0 ? homeBytes.length : domainEnd - domainAt) + (yes ? ALLOWED.length : DENIED.length)
  }
  const body = Buffer.allocUnsafe(length)
  let at = put(body, 0, HEAD)
  for (let c = 0, s = 0; c < count; c++, s += SPAN_FIELDS) {
    if (c > 0) body[at++] = 0x2c
    at = put(body, at, OBJ)
    at = put(body, at, source, spans[s], spans[s + 1])
    at = put(body, at, ACT)
    at = put(body, at, source, spans[s + 2], spans[s + 3])
    at = put(body, at, DOMAIN)
    const domainAt = spans[s + 4] as number
    at = domainAt < 0 ? put(body, at, homeBytes) : put(body, at, source, domainAt, spans[s + 5])
    at = put(body, at, decided[c] === 1 ? ALLOWED : DENIED)
  }
  put(body, at, TAIL)
  return { body, allowed }
}
