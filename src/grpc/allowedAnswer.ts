import { delimited, WireWriter } from './wire.js'

/**
 * The allowed ext_authz answer written straight in protobuf's wire format:
 * the bytes protobufjs writes for the same CheckResponse (status OK,
 * ok_response with the identity and decision id headers, each
 * OVERWRITE_IF_EXISTS_OR_ADD, and the merchant id header to remove for a
 * user without one), without building the message objects, converting them
 * (fromObject) and encoding them field by field on every allowed call, the
 * gateway's most frequent answer (the service is registered
 * withEncodedAnswers, wire.ts). test/grpc/allowedAnswer.test.ts compares
 * the two byte for byte. Field numbers: proto/envoy/service/auth/v3/ and
 * proto/envoy/config/core/v3/base.proto.
 */

/** CheckResponse.status (1), a google.rpc.Status whose code (1) is 0, as protobufjs writes it. */
const OK_STATUS = [0x0a, 0x02, 0x08, 0x00]
/** CheckResponse.ok_response: field 3, length-delimited. */
const OK_RESPONSE = 0x1a
/** OkHttpResponse.headers (2), HeaderValueOption.header (1), HeaderValue.key (1) and .value (2); all length-delimited. */
const HEADERS = 0x12
const HEADER = 0x0a
const KEY = 0x0a
const VALUE = 0x12
/** HeaderValueOption.append_action (3, varint) = OVERWRITE_IF_EXISTS_OR_ADD. */
const OVERWRITE = [0x18, 0x02]
/** OkHttpResponse.headers_to_remove (5), length-delimited. */
const TO_REMOVE = 0x2a

const MERCHANT_HEADER = 'x-authz-merchant-id'

interface Header {
  key: string
  value: string
  keyLength: number
  valueLength: number
  /** HeaderValue's length. */
  inner: number
  /** HeaderValueOption's length. */
  option: number
}

function measured(key: string, value: string): Header {
  const keyLength = Buffer.byteLength(key)
  const valueLength = Buffer.byteLength(value)
  const inner = delimited(keyLength) + delimited(valueLength)
  return { key, value, keyLength, valueLength, inner, option: delimited(inner) + OVERWRITE.length }
}

function writeHeader(w: WireWriter, h: Header): void {
  w.open(HEADERS, h.option)
  w.open(HEADER, h.inner)
  w.text(KEY, h.key, h.keyLength)
  w.text(VALUE, h.value, h.valueLength)
  for (const b of OVERWRITE) w.byte(b)
}

/** The account an answer names. */
export interface AnswerAccount {
  readonly id: string
  readonly merchant_id: string | null
}

/** An account's identity headers (and the merchant header to remove, for a user without one), encoded once. */
interface Identity {
  userId: string
  merchantId: string | null
  headers: Buffer
  remove: Buffer
}

/**
 * By account object: the authenticator hands the same object for every
 * call of a token it has verified, so only the decision id is written per
 * call. Checked against the account's id and merchant before use, so an
 * account changed in place is encoded again.
 */
const identities = new WeakMap<AnswerAccount, Identity>()

function identity(account: AnswerAccount): Identity {
  const known = identities.get(account)
  if (known !== undefined && known.userId === account.id && known.merchantId === account.merchant_id) return known
  const headers = [measured('x-authz-user-id', account.id)]
  if (account.merchant_id !== null) headers.push(measured(MERCHANT_HEADER, account.merchant_id))
  const w = new WireWriter(headers.reduce((sum, h) => sum + delimited(h.option), 0))
  for (const h of headers) writeHeader(w, h)
  // A client's own merchant id header never reaches the upstream when the user has none.
  const removeLength = Buffer.byteLength(MERCHANT_HEADER)
  const remove = new WireWriter(account.merchant_id === null ? delimited(removeLength) : 0)
  if (account.merchant_id === null) remove.text(TO_REMOVE, MERCHANT_HEADER, removeLength)
  const made = { userId: account.id, merchantId: account.merchant_id, headers: w.buffer, remove: remove.buffer }
  identities.set(account, made)
  return made
}

/** The encoded CheckResponse allowing `account` under `decisionId`. */
export function allowedAnswer(account: AnswerAccount, decisionId: string): Buffer {
  const { headers, remove } = identity(account)
  const decision = measured('x-decision-id', decisionId)
  const ok = headers.length + delimited(decision.option) + remove.length
  const w = new WireWriter(OK_STATUS.length + delimited(ok))
  for (const b of OK_STATUS) w.byte(b)
  w.open(OK_RESPONSE, ok)
  w.bytes(headers)
  writeHeader(w, decision)
  w.bytes(remove)
  return w.buffer
}
