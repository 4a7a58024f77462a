/**
 * check-batch's body in its plainest form, read without JSON.parse or Ajv
 * for the gateway's fast path: `{"command":"check-batch","data":{"checks":
 * [{"obj":…,"act":…,"domain":…},…]}}`, members in any order, JSON
 * whitespace between tokens. Only a subset of what the route's schema
 * accepts is recognised (test/http/plainBatch.test.ts compares the two over
 * generated bodies): every key once and written without escapes, no
 * `user_id`, `explain` or `min_revision`, 1 to 100 checks, every value a
 * string without escapes matching its pattern (identifiers.ts), nothing
 * after the object. Anything else is not read here, and Fastify's route
 * answers it (its envelopes, its messages); so this never has to say why.
 * It reads bytes and builds nothing: each check's values are recorded as
 * where they lie in the body, and they are ASCII, so those bytes are their
 * text.
 */

import { DOMAIN_PATTERN, PERMISSION_PART_PATTERN, identifierBytes } from '../domain/identifiers.js'

/** Most checks one batch asks (the route's schema: maxItems). */
export const MAX_BATCH_CHECKS = 100

/** Numbers recorded per check in `spans`: obj's start and end, act's, domain's (-1, -1 when absent). */
export const SPAN_FIELDS = 6

/** Room for the spans of the largest batch. */
export const newSpans = (): Int32Array => new Int32Array(MAX_BATCH_CHECKS * SPAN_FIELDS)

const TAB = 0x09
const LF = 0x0a
const CR = 0x0d
const SPACE = 0x20
const QUOTE = 0x22
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const FAILED = -1
/** The two patterns' bytes, read from the patterns (identifiers.ts). */
const PART_BYTES = identifierBytes(PERMISSION_PART_PATTERN)
const DOMAIN_BYTES = identifierBytes(DOMAIN_PATTERN)

/** A key as it must be written, without its opening quote: the name and the closing quote. */
const keyBytes = (name: string) => Buffer.from(`${name}"`, 'latin1')
const OBJ = keyBytes('obj')
const ACT = keyBytes('act')
const DOMAIN = keyBytes('domain')
const COMMAND = keyBytes('command')
const DATA = keyBytes('data')
const CHECKS = keyBytes('checks')
const CHECK_BATCH = Buffer.from('"check-batch"', 'latin1')

function skipSpace(body: Uint8Array, at: number): number {
  let i = at
  const length = body.length
  while (i < length) {
    const c = body[i] as number
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i
    i++
  }
  return i
}

/** Whether `word` is written at `at`. */
function written(body: Uint8Array, at: number, word: Uint8Array): boolean {
  if (at + word.length > body.length) return false
  for (let k = 0; k < word.length; k++) if (body[at + k] !== word[k]) return false
  return true
}

/**
 * Past `"name":` and the space after it, when the key at `at` is exactly
 * `name` (given as keyBytes); else FAILED. A name holds no quote or
 * backslash: the key matches only when written as the name itself.
 */
function afterKey(body: Uint8Array, at: number, name: Uint8Array): number {
  if (body[at] !== QUOTE || !written(body, at + 1, name)) return FAILED
  const colon = skipSpace(body, at + 1 + name.length)
  return body[colon] === COLON ? skipSpace(body, colon + 1) : FAILED
}

/**
 * The end (past its closing quote) of a quoted value at `at` matching
 * PERMISSION_PART_PATTERN or, with `domain`, DOMAIN_PATTERN; else FAILED.
 * Neither allows a quote, a backslash or a byte past ASCII, so the value is
 * its bytes as sent.
 */
function identifierEnd(body: Uint8Array, at: number, domain: boolean): number {
  if (body[at] !== QUOTE) return FAILED
  const bytes = domain ? DOMAIN_BYTES : PART_BYTES
  if (bytes.first[body[at + 1] as number] !== 1) return FAILED
  // Past the longest value only its closing quote may stand.
  const limit = Math.min(at + 1 + bytes.maxLength, body.length)
  for (let i = at + 2; i < limit; i++) {
    const c = body[i] as number
    if (c === QUOTE) return i + 1
    if (bytes.rest[c] !== 1) return FAILED
  }
  return body[limit] === QUOTE ? limit + 1 : FAILED
}

/** One check `{"obj":…,"act":…,"domain":…}` at `at`, its spans recorded at `slot`: its end, else FAILED. */
function readCheck(body: Uint8Array, at: number, spans: Int32Array, slot: number): number {
  if (body[at] !== OPEN_OBJECT) return FAILED
  // Value starts (past the quote) and ends (at the quote); -1 while not seen: each key is taken once.
  let objAt = -1
  let objEnd = -1
  let actAt = -1
  let actEnd = -1
  let domainAt = -1
  let domainEnd = -1
  let i = skipSpace(body, at + 1)
  for (;;) {
    // The key's first letter says which it may be.
    const first = body[i + 1]
    let value: number
    let end: number
    if (first === 0x6f && objAt < 0) {
      value = afterKey(body, i, OBJ)
      end = value === FAILED ? FAILED : identifierEnd(body, value, false)
      objAt = value + 1
      objEnd = end - 1
    } else if (first === 0x61 && actAt < 0) {
      value = afterKey(body, i, ACT)
      end = value === FAILED ? FAILED : identifierEnd(body, value, false)
      actAt = value + 1
      actEnd = end - 1
    } else if (first === 0x64 && domainAt < 0) {
      value = afterKey(body, i, DOMAIN)
      end = value === FAILED ? FAILED : identifierEnd(body, value, true)
      domainAt = value + 1
      domainEnd = end - 1
    } else return FAILED
    if (end === FAILED) return FAILED
    i = skipSpace(body, end)
    const c = body[i]
    if (c === CLOSE_OBJECT) break
    if (c !== COMMA) return FAILED
    i = skipSpace(body, i + 1)
  }
  if (objAt < 0 || actAt < 0) return FAILED
  spans[slot] = objAt
  spans[slot + 1] = objEnd
  spans[slot + 2] = actAt
  spans[slot + 3] = actEnd
  spans[slot + 4] = domainAt
  spans[slot + 5] = domainEnd
  return i + 1
}

/** `{"checks":[…]}` at `at`: its end, the number of checks in `counted[0]`; else FAILED. */
function readData(body: Uint8Array, at: number, spans: Int32Array, counted: [number]): number {
  if (body[at] !== OPEN_OBJECT) return FAILED
  let i = afterKey(body, skipSpace(body, at + 1), CHECKS)
  if (i === FAILED || body[i] !== OPEN_ARRAY) return FAILED
  let checks = 0
  i = skipSpace(body, i + 1)
  for (;;) {
    if (checks === MAX_BATCH_CHECKS) return FAILED
    i = readCheck(body, i, spans, checks * SPAN_FIELDS)
    if (i === FAILED) return FAILED
    checks++
    i = skipSpace(body, i)
    const c = body[i]
    if (c === CLOSE_ARRAY) break
    if (c !== COMMA) return FAILED
    i = skipSpace(body, i + 1)
  }
  i = skipSpace(body, i + 1)
  if (body[i] !== CLOSE_OBJECT) return FAILED
  counted[0] = checks
  return i + 1
}

/**
 * The number of checks of a body in the plain form, with where each check's
 * values lie recorded in `spans` (SPAN_FIELDS per check, in order); -1 when
 * the body is not in that form.
 */
export function readPlainBatch(body: Uint8Array, spans: Int32Array): number {
  let command = false
  const counted: [number] = [FAILED]
  let i = skipSpace(body, 0)
  if (body[i] !== OPEN_OBJECT) return FAILED
  i = skipSpace(body, i + 1)
  for (;;) {
    const first = body[i + 1]
    if (first === 0x63 && !command) {
      const value = afterKey(body, i, COMMAND)
      if (value === FAILED || !written(body, value, CHECK_BATCH)) return FAILED
      command = true
      i = value + CHECK_BATCH.length
    } else if (first === 0x64 && counted[0] === FAILED) {
      const value = afterKey(body, i, DATA)
      if (value === FAILED) return FAILED
      i = readData(body, value, spans, counted)
      if (i === FAILED) return FAILED
    } else return FAILED
    i = skipSpace(body, i)
    const c = body[i]
    if (c === CLOSE_OBJECT) break
    if (c !== COMMA) return FAILED
    i = skipSpace(body, i + 1)
  }
  return command && skipSpace(body, i + 1) === body.length ? counted[0] : FAILED
}
