import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js'

/**
 * What the answers written by hand in protobuf's wire format share
 * (allowedAnswer.ts, batchAnswer.ts): sizes, a writer into one buffer of
 * the exact size, and the service definition that sends such a buffer as
 * it is. Each is checked byte for byte against protobufjs's encoding of the
 * same message by its test.
 */

/** Bytes of `n` as a varint. */
export function varintSize(n: number): number {
  let size = 1
  for (let rest = n >>> 7; rest > 0; rest >>>= 7) size++
  return size
}

/** Bytes of a length-delimited field (a one-byte tag) whose value is `length` bytes. */
export const delimited = (length: number): number => 1 + varintSize(length) + length

export class WireWriter {
  readonly buffer: Buffer
  private at = 0

  constructor(size: number) {
    this.buffer = Buffer.allocUnsafe(size)
  }

  byte(value: number): void {
    this.buffer[this.at++] = value
  }

  varint(n: number): void {
    let rest = n
    while (rest > 0x7f) {
      this.buffer[this.at++] = (rest & 0x7f) | 0x80
      rest >>>= 7
    }
    this.buffer[this.at++] = rest
  }

  /** Bytes encoded before. */
  bytes(value: Buffer): void {
    this.at += value.copy(this.buffer, this.at)
  }

  /** A length-delimited field's tag and length, its value to follow. */
  open(tag: number, length: number): void {
    this.buffer[this.at++] = tag
    this.varint(length)
  }

  /** A string field of `length` bytes (Buffer.byteLength). */
  text(tag: number, value: string, length: number): void {
    this.open(tag, length)
    this.at += this.buffer.write(value, this.at, length, 'utf8')
  }
}

/**
 * `definition` with the named methods' answer serializers sending a Buffer
 * (an answer already encoded) as it is, and encoding anything else as the
 * library would.
 */
export function withEncodedAnswers(definition: ServiceDefinition, ...methods: string[]): ServiceDefinition {
  const changed: Record<string, MethodDefinition<unknown, unknown>> = { ...definition }
  for (const name of methods) {
    const method = definition[name] as MethodDefinition<unknown, unknown>
    const serialize = method.responseSerialize
    changed[name] = { ...method, responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : serialize(value)) }
  }
  return changed as ServiceDefinition
}
