import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js'

/**
 * Envoy's CheckRequest read straight off the wire, keeping only what the
 * service reads: the HTTP request's method and path and the few headers in
 * READ_HEADERS. protobufjs would build the whole message (every header into
 * a map, then all of it again as a plain object) on every call, the
 * gateway's most frequent one.
 *
 * It accepts and refuses exactly what the library's decoder (protobufjs 7,
 * as @grpc/proto-loader sets it up) does, so a call is answered the same
 * either way: the same varint reading (a tag or length is read as 32 bits;
 * a fifth byte with its high bit set skips five more bytes unread), a
 * string cut at the end of the message that holds it, a known field read
 * as its declared type whatever its wire type, a repeated message field
 * replacing the earlier one whole, map entries with the last key and value
 * of each entry and the last entry of each key, unknown fields skipped by
 * wire type (groups to the same nesting limit), a length past its message's
 * end refused. test/grpc/checkRequest.test.ts compares the two on many
 * generated and damaged messages. Field numbers: proto/envoy/service/auth/v3/.
 */

/** The headers of the request Envoy holds that the service reads (the token, the answer's language, what the decision log records). */
export const READ_HEADERS = ['authorization', 'accept-language', 'x-request-id', 'x-forwarded-for'] as const
type ReadHeader = (typeof READ_HEADERS)[number]

/** What the service reads of a CheckRequest: attributes.request.http's method, path and READ_HEADERS (absent when the message has none). */
export interface CheckRequestRead {
  method: string | undefined
  path: string | undefined
  headers: Partial<Record<ReadHeader, string>>
}

/** protobufjs's nesting limit for groups (protoc's default recursion limit). */
const RECURSION_LIMIT = 100

/** CheckRequest.attributes (1), AttributeContext.request (4), Request.http (2): each message, the field that leads to the next. */
const ATTRIBUTES = 1
const REQUEST = 4
const HTTP = 2
/** AttributeContext.HttpRequest's fields: strings but for headers, a map<string, string> (entry key 1, value 2). */
const ID = 1
const METHOD = 2
const HEADERS = 3
const PATH = 4
const HOST = 5
const SCHEME = 6
const PROTOCOL = 10

/** The messages on the way down, by their nesting depth: CheckRequest 0, AttributeContext 1, its Request 2, HttpRequest 3. */
const LEVEL_ATTRIBUTES = 1
const LEVEL_HTTP = 3

const NAMES = READ_HEADERS.map((name) => Buffer.from(name))

function outOfRange(): RangeError {
  return new RangeError('index out of range')
}

/** Buffer's own UTF-8 decoder of a range, without toString's argument checks (protobufjs calls the same). */
type Utf8Slicing = Buffer & { utf8Slice(start: number, end: number): string }

class CheckRequestReader {
  private pos = 0
  /** The end of the message being read. */
  private len: number
  private method: string | undefined = undefined
  private path: string | undefined = undefined
  /** READ_HEADERS's values, in that order. */
  private readonly values: (string | undefined)[] = READ_HEADERS.map(() => undefined)

  constructor(private readonly buf: Utf8Slicing) {
    this.len = buf.length
  }

  read(): CheckRequestRead {
    const end = this.len
    while (this.pos < end) {
      const tag = this.uint32()
      if (tag >>> 3 === ATTRIBUTES) this.message(LEVEL_ATTRIBUTES)
      else this.skipType(tag & 7, 0)
    }
    const headers: CheckRequestRead['headers'] = {}
    for (let i = 0; i < READ_HEADERS.length; i++) {
      const value = this.values[i]
      if (value !== undefined) headers[READ_HEADERS[i] as ReadHeader] = value
    }
    return { method: this.method, path: this.path, headers }
  }

  /**
   * An embedded message (its length first) at nesting `level`, read within
   * its bounds. A later message field replaces an earlier one whole, so
   * what the earlier one held is forgotten. No read goes past `len`, so
   * the message ends exactly at its end (protobufjs's check that it does
   * never fails).
   */
  private message(level: number): void {
    const length = this.uint32()
    const end = this.pos + length
    if (end > this.len) throw outOfRange()
    const outer = this.len
    this.len = end
    this.method = undefined
    this.path = undefined
    this.values.fill(undefined)
    while (this.pos < end) {
      const tag = this.uint32()
      const field = tag >>> 3
      if (level === LEVEL_HTTP) this.httpField(field, tag, level)
      else if (field === (level === LEVEL_ATTRIBUTES ? REQUEST : HTTP)) this.message(level + 1)
      else this.skipType(tag & 7, level)
    }
    this.len = outer
  }

  private httpField(field: number, tag: number, depth: number): void {
    switch (field) {
      case METHOD:
        this.method = this.string()
        return
      case PATH:
        this.path = this.string()
        return
      case HEADERS:
        return this.header(depth)
      case ID:
      case HOST:
      case SCHEME:
      case PROTOCOL:
        this.stringEnd()
        return
      default:
        return this.skipType(tag & 7, depth)
    }
  }

  /** One map entry: kept when its key is one of READ_HEADERS (a key or value absent is ""). */
  private header(depth: number): void {
    const end = this.uint32() + this.pos
    if (end > this.len) throw outOfRange()
    const outer = this.len
    this.len = end
    let keyStart = 0
    let keyEnd = 0
    let valueStart = 0
    let valueEnd = 0
    while (this.pos < end) {
      const tag = this.uint32()
      const field = tag >>> 3
      if (field === 1) {
        keyEnd = this.stringEnd()
        keyStart = this.start
      } else if (field === 2) {
        valueEnd = this.stringEnd()
        valueStart = this.start
      } else this.skipType(tag & 7, depth)
    }
    this.len = outer
    const header = this.readHeader(keyStart, keyEnd)
    if (header >= 0) this.values[header] = this.buf.utf8Slice(valueStart, valueEnd)
  }

  /** Which of READ_HEADERS the key's bytes spell, or -1. */
  private readHeader(start: number, end: number): number {
    const length = end - start
    for (let i = 0; i < NAMES.length; i++) {
      const name = NAMES[i] as Buffer
      if (name.length !== length) continue
      let at = 0
      while (at < length && this.buf[start + at] === name[at]) at++
      if (at === length) return i
    }
    return -1
  }

  /** Where the last string read began. */
  private start = 0

  /** A string field's bytes (its length first, cut at the message's end): skipped, their end returned and their start in `start`. */
  private stringEnd(): number {
    const length = this.uint32()
    this.start = this.pos
    this.pos = Math.min(this.pos + length, this.len)
    return this.pos
  }

  private string(): string {
    const end = this.stringEnd()
    return this.buf.utf8Slice(this.start, end)
  }

  /** A varint read as protobufjs reads a tag or a length. */
  private uint32(): number {
    const buf = this.buf
    if (this.len - this.pos < 5) {
      if (this.pos >= this.len) throw outOfRange()
      if ((buf[this.pos] as number) >= 128) return this.uint32NearEnd()
    }
    let b = buf[this.pos++] as number
    let value = b & 127
    if (b < 128) return value
    b = buf[this.pos++] as number
    value |= (b & 127) << 7
    if (b < 128) return value
    b = buf[this.pos++] as number
    value |= (b & 127) << 14
    if (b < 128) return value
    b = buf[this.pos++] as number
    value |= (b & 127) << 21
    if (b < 128) return value
    b = buf[this.pos++] as number
    value = (value | ((b & 15) << 28)) >>> 0
    if (b < 128) return value
    // Bytes six to ten of a 64-bit varint: skipped unread.
    if ((this.pos += 5) > this.len) {
      this.pos = this.len
      throw outOfRange()
    }
    return value
  }

  /** Fewer than five bytes left: at most four are read, and a varint not ended by then is refused. */
  private uint32NearEnd(): number {
    let value = 0
    for (let i = 0; i < 4; i++) {
      if (this.pos >= this.len) throw outOfRange()
      const b = this.buf[this.pos++] as number
      value = (value | ((b & 127) << (i * 7))) >>> 0
      if (b < 128) return value
    }
    throw outOfRange()
  }

  private skip(length: number): void {
    if (this.pos + length > this.len) throw outOfRange()
    this.pos += length
  }

  private skipType(wireType: number, depth: number): void {
    if (depth > RECURSION_LIMIT) throw new Error('maximum nesting depth exceeded')
    switch (wireType) {
      case 0:
        do {
          if (this.pos >= this.len) throw outOfRange()
        } while ((this.buf[this.pos++] as number) & 128)
        return
      case 1:
        return this.skip(8)
      case 2:
        return this.skip(this.uint32())
      case 3: {
        let inner: number
        while ((inner = this.uint32() & 7) !== 4) this.skipType(inner, depth + 1)
        return
      }
      case 5:
        return this.skip(4)
      default:
        throw new Error(`invalid wire type ${wireType}`)
    }
  }
}

/** A CheckRequest's bytes, read as far as the service reads them; throws on a message protobufjs refuses (the call then ends INTERNAL, as before). */
export function decodeCheckRequest(bytes: Buffer): CheckRequestRead {
  return new CheckRequestReader(bytes as Utf8Slicing).read()
}

/** `definition` with `method`'s requests read by decodeCheckRequest instead of protobufjs. */
export function withCheckRequestDecoder(definition: ServiceDefinition, method: string): ServiceDefinition {
  const original = definition[method] as MethodDefinition<unknown, unknown>
  return { ...definition, [method]: { ...original, requestDeserialize: decodeCheckRequest } }
}
