/**
 * The CheckRequest reader written by hand and protobufjs's decoder (as
 * @grpc/proto-loader sets it up, what the service used before) agree on
 * every message: both refuse it, or both read the same method, path and
 * headers. Messages are generated with fields in any order, unknown fields
 * of every wire type, known fields under the wrong wire type, repeated
 * messages and map entries, lengths written with more bytes than needed,
 * and then cut short and damaged.
 */
import t, { type Test } from 'tap'
import type { MethodDefinition } from '@grpc/grpc-js'
import { decodeCheckRequest, READ_HEADERS, withCheckRequestDecoder } from '../../src/grpc/checkRequest.js'
import { loadServiceProtos } from '../../src/grpc/protos.js'

const definition = loadServiceProtos().extAuthz
const library = (definition.Check as MethodDefinition<unknown, unknown>).requestDeserialize

interface Read {
  refused: boolean
  method?: string | undefined
  path?: string | undefined
  headers?: Record<string, string>
}

interface LibraryRequest {
  attributes?: { request?: { http?: { method?: string; path?: string; headers?: Record<string, string> } } }
}

function byLibrary(bytes: Buffer): Read {
  let decoded: LibraryRequest
  try {
    decoded = library(bytes) as LibraryRequest
  } catch {
    return { refused: true }
  }
  const http = decoded.attributes?.request?.http
  const all = http?.headers ?? {}
  const headers: Record<string, string> = {}
  for (const name of READ_HEADERS) if (Object.hasOwn(all, name)) headers[name] = all[name] as string
  return { refused: false, method: http?.method, path: http?.path, headers }
}

function byHand(bytes: Buffer): Read {
  try {
    const read = decodeCheckRequest(bytes)
    return { refused: false, method: read.method, path: read.path, headers: { ...read.headers } as Record<string, string> }
  } catch {
    return { refused: true }
  }
}

/** A seeded generator, so that a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

class Gen {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T
  }

  /** A varint, sometimes written with more bytes than it needs (protobufjs reads those too). */
  varint(n: number): Buffer {
    const bytes: number[] = []
    let rest = n
    while (rest > 0x7f) {
      bytes.push((rest % 128) | 0x80)
      rest = Math.floor(rest / 128)
    }
    bytes.push(rest)
    if (this.chance(0.05) && bytes.length < 5) {
      bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) | 0x80
      while (bytes.length < 4) bytes.push(0x80)
      bytes.push(0)
    }
    return Buffer.from(bytes)
  }
  tag(field: number, wireType: number): Buffer {
    return this.varint(field * 8 + wireType)
  }
  delimited(field: number, body: Buffer): Buffer {
    return Buffer.concat([this.tag(field, 2), this.varint(body.length), body])
  }
  text(): string {
    return this.pick(['', 'GET', 'POST', '/api/orders/42?expand=lines', 'Bearer abc.def.ghi', 'es-ES,en;q=0.5', 'r-1', '10.0.0.1', 'ü-ñ-€', 'x'.repeat(200)])
  }
  /** An unknown field of any wire type, groups nested up to `depth`. */
  unknown(depth = 0): Buffer {
    const field = this.pick([7, 9, 15, 16, 100, 2047, 536870911])
    switch (this.int(depth < 3 ? 5 : 4)) {
      case 0:
        return Buffer.concat([this.tag(field, 0), this.chance(0.2) ? Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]) : this.varint(this.int(300))])
      case 1:
        return Buffer.concat([this.tag(field, 1), Buffer.alloc(8, 7)])
      case 2:
        return this.delimited(field, Buffer.from(this.text()))
      case 3:
        return Buffer.concat([this.tag(field, 5), Buffer.alloc(4, 9)])
      default:
        return Buffer.concat([this.tag(field, 3), ...Array.from({ length: this.int(3) }, () => this.unknown(depth + 1)), this.tag(field, 4)])
    }
  }
  /** A known field, mostly under its own wire type, sometimes under another (protobufjs reads it as declared all the same). */
  known(field: number, body: Buffer): Buffer {
    if (this.chance(0.03)) return Buffer.concat([this.tag(field, this.pick([0, 1, 5])), this.varint(body.length), body])
    return this.delimited(field, body)
  }
  fields(parts: Array<() => Buffer>, most: number): Buffer {
    const chosen = Array.from({ length: this.int(most + 1) }, () => this.pick(parts)())
    return Buffer.concat(chosen)
  }
  entry(): Buffer {
    const key = this.pick([...READ_HEADERS, ...READ_HEADERS, 'Authorization', 'authorizatio', 'user-agent', ':path', '', '__proto__', 'x-forwarded-fo'])
    return this.fields(
      [() => this.known(1, Buffer.from(key)), () => this.known(1, Buffer.from(key)), () => this.known(2, Buffer.from(this.text())), () => this.unknown()],
      3,
    )
  }
  http(): Buffer {
    return this.fields(
      [
        () => this.known(2, Buffer.from(this.pick(['GET', 'POST', '']))),
        () => this.known(4, Buffer.from(this.text())),
        () => this.known(3, this.entry()),
        () => this.known(3, this.entry()),
        () => this.known(this.pick([1, 5, 6, 10]), Buffer.from(this.text())),
        () => this.unknown(),
      ],
      10,
    )
  }
  nested(field: number, inner: () => Buffer): Buffer {
    return this.fields([() => this.known(field, inner()), () => this.known(field, inner()), () => this.unknown()], 3)
  }
  checkRequest(): Buffer {
    return this.nested(1, () => this.nested(4, () => this.nested(2, () => this.http())))
  }
  /** The message cut short, a byte changed, inserted or removed. */
  damaged(bytes: Buffer): Buffer {
    if (bytes.length === 0) return Buffer.from([this.int(256)])
    const at = this.int(bytes.length)
    switch (this.int(4)) {
      case 0:
        return bytes.subarray(0, at)
      case 1: {
        const copy = Buffer.from(bytes)
        copy[at] = this.int(256)
        return copy
      }
      case 2:
        return Buffer.concat([bytes.subarray(0, at), Buffer.from([this.int(256)]), bytes.subarray(at)])
      default:
        return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)])
    }
  }
}

function agree(t: Test, bytes: Buffer, what: string): boolean {
  const expected = byLibrary(bytes)
  const got = byHand(bytes)
  if (JSON.stringify(got) === JSON.stringify(expected)) return true
  t.same(got, expected, `${what}: ${bytes.toString('hex')}`)
  return false
}

t.test('the request as a client encodes it', async (t) => {
  const encode = (definition.Check as MethodDefinition<unknown, unknown>).requestSerialize
  const headers = { ':authority': 'shop.example', authorization: 'Bearer abc', 'accept-language': 'es', 'x-request-id': 'r-1', 'x-forwarded-for': '10.0.0.1', 'user-agent': 'bench' }
  const bytes = encode({ attributes: { request: { http: { id: '7', method: 'GET', path: '/api/orders/42?expand=lines', host: 'shop.example', headers } } } })
  t.same(decodeCheckRequest(bytes), { method: 'GET', path: '/api/orders/42?expand=lines', headers: { authorization: 'Bearer abc', 'accept-language': 'es', 'x-request-id': 'r-1', 'x-forwarded-for': '10.0.0.1' } })
  t.same(decodeCheckRequest(Buffer.alloc(0)), { method: undefined, path: undefined, headers: {} }, 'an empty message: nothing')
  t.ok(agree(t, bytes, 'encoded by protobufjs'))
})

t.test('cases picked by hand', async (t) => {
  const http = (body: number[]): Buffer => {
    const request = [0x12, body.length, ...body]
    const attributes = [0x22, request.length, ...request]
    return Buffer.from([0x0a, attributes.length, ...attributes])
  }
  const cases: Array<[string, Buffer, boolean]> = [
    // A string longer than what is left of its message is cut at the message's end.
    ['a string past its message end', http([0x12, 0x09, 0x47, 0x45, 0x54]), false],
    ['a length past the buffer', Buffer.from([0x0a, 0x05, 0x22]), true],
    // A tag (field 0, a varint) whose fifth byte has its high bit set: five more bytes skipped unread, then the varint's value.
    ['a tag with a fifth byte continued skips five more', Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), false],
    ['the same, three bytes short', Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0xff, 0xff]), true],
    ['wire type 4 outside a group', Buffer.from([0x3c]), true],
    ['wire type 6', Buffer.from([0x3e]), true],
    ['wire type 7', Buffer.from([0x3f]), true],
    ['field 0', Buffer.from([0x00, 0x01]), false],
    ['a varint cut short', Buffer.from([0x38, 0x80]), true],
    ['method twice: the last one', http([0x12, 0x03, 0x47, 0x45, 0x54, 0x12, 0x04, 0x50, 0x4f, 0x53, 0x54]), false],
    ['method as a varint field: read as a string all the same', http([0x10, 0x03, 0x47, 0x45, 0x54]), false],
  ]
  for (const [what, bytes, refused] of cases) {
    t.equal(byHand(bytes).refused, refused, `${what}: ${refused ? 'refused' : 'read'}`)
    t.ok(agree(t, bytes, what), `${what}: as protobufjs`)
  }
  // Groups nest to protobufjs's limit at each level, and no further.
  for (const depth of [99, 100, 101, 102, 103]) {
    const group = Buffer.concat([Buffer.alloc(depth, 0x3b), Buffer.alloc(depth, 0x3c)])
    t.ok(agree(t, group, `${depth} nested groups at the top`), `${depth} nested groups at the top: as protobufjs`)
    t.ok(agree(t, http([...group]), `${depth} nested groups in http`), `${depth} nested groups in http: as protobufjs`)
  }
})

t.test('generated messages, whole and damaged', async (t) => {
  const seed = Number(process.env.CHECK_REQUEST_SEED ?? 34)
  const gen = new Gen(random(seed))
  let compared = 0
  let refused = 0
  let disagreements = 0
  for (let i = 0; i < 4000 && disagreements < 5; i++) {
    const bytes = gen.checkRequest()
    const variants = [bytes, gen.damaged(bytes), gen.damaged(bytes), gen.damaged(gen.damaged(bytes)), bytes.subarray(0, gen.int(bytes.length + 1))]
    for (const variant of variants) {
      compared++
      if (byLibrary(variant).refused) refused++
      if (!agree(t, variant, `seed ${seed}, message ${i}`)) disagreements++
    }
  }
  t.equal(disagreements, 0, `${compared} messages, ${refused} refused by both`)
  // The generator must reach both sides of the comparison to mean anything.
  t.ok(refused > compared / 10 && refused < (compared * 4) / 5, `a share refused (${refused} of ${compared})`)
})

t.test('the service definition reads Check with it and leaves the rest', async (t) => {
  const changed = withCheckRequestDecoder(definition, 'Check')
  const check = changed.Check as MethodDefinition<unknown, unknown>
  t.equal(check.requestDeserialize, decodeCheckRequest)
  t.equal(check.responseSerialize, (definition.Check as MethodDefinition<unknown, unknown>).responseSerialize)
})
