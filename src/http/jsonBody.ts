import type { IncomingMessage } from 'node:http'
import { errorCodes, type FastifyRequest } from 'fastify'
import { ServiceError } from '../domain/errors.js'

/**
 * What the largest valid body of any route fits in, with room to spare:
 * check-batch's 100 checks are about 400 values 4 levels deep, and no field
 * takes more than a few hundred characters. test/http/requestCost.test.ts
 * checks every route's body schema against these.
 */
export const JSON_BODY_BOUNDS = {
  /** Objects, arrays and the members or items after the first (each `{`, `[` and `,`). */
  maxValues: 1024,
  maxDepth: 16,
  /** Bytes of one string, as sent (escapes count as written). */
  maxStringBytes: 4096,
} as const

export type JsonBodyBounds = { readonly [K in keyof typeof JSON_BODY_BOUNDS]: number }

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route whose largest valid body is past JSON_BODY_BOUNDS (a list of a thousand changes) names its own. */
    bodyBounds?: JsonBodyBounds
  }
}

type Exceeded = 'too_many_values' | 'too_deep' | 'string_too_long'

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_OBJECT = 0x7b
const OPEN_ARRAY = 0x5b
const CLOSE_OBJECT = 0x7d
const CLOSE_ARRAY = 0x5d
const COMMA = 0x2c

/**
 * Follows a JSON text's structure chunk by chunk as it arrives, without
 * building anything: one pass over the bytes, a few counters. A body no
 * route could accept is refused before JSON.parse, Ajv and the error
 * listing walk it (a 1 MiB body of 100,000 `{}` costs them seconds).
 * It does not check the grammar: JSON.parse still does that.
 */
export class JsonShape {
  private inString = false
  private escaped = false
  private depth = 0
  private values = 0
  private stringBytes = 0

  constructor(private readonly bounds: JsonBodyBounds = JSON_BODY_BOUNDS) {}

  /** The bound this chunk takes the text past, or null. */
  feed(chunk: Uint8Array): Exceeded | null {
    const { maxValues, maxDepth, maxStringBytes } = this.bounds
    // Locals, not fields, in the loop: it runs once per byte of every body.
    let { inString, escaped, depth, values, stringBytes } = this
    let exceeded: Exceeded | null = null
    const length = chunk.length
    for (let i = 0; i < length; i++) {
      const byte = chunk[i]
      if (inString) {
        if (escaped) escaped = false
        else if (byte === QUOTE) {
          inString = false
          continue
        } else if (byte === BACKSLASH) escaped = true
        if (++stringBytes > maxStringBytes) {
          exceeded = 'string_too_long'
          break
        }
      } else if (byte === QUOTE) {
        inString = true
        stringBytes = 0
      } else if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) {
        if (++depth > maxDepth) {
          exceeded = 'too_deep'
          break
        }
        if (++values > maxValues) {
          exceeded = 'too_many_values'
          break
        }
      } else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
        depth--
      } else if (byte === COMMA && ++values > maxValues) {
        exceeded = 'too_many_values'
        break
      }
    }
    this.inString = inString
    this.escaped = escaped
    this.depth = depth
    this.values = values
    this.stringBytes = stringBytes
    return exceeded
  }
}

type Done = (error: Error | null, body?: unknown) => void
type StringParser = (request: FastifyRequest, body: string, done: Done) => void

/**
 * The `application/json` body parser: reads the body as Fastify's own does
 * (the route's body limit, the Content-Length checked), follows its shape
 * as each chunk arrives, and hands the text to Fastify's JSON parser (which
 * refuses `__proto__` and `constructor` keys) only when it fits
 * JSON_BODY_BOUNDS (or the route's `bodyBounds`). A body past them is a 400 `100` naming `body`; the rest
 * of it is not read into memory.
 */
export function boundedJsonParser(parse: StringParser) {
  return (request: FastifyRequest, payload: IncomingMessage, done: Done): void => {
    const limit = request.routeOptions.bodyLimit
    const declared = Number(request.headers['content-length'])
    if (declared > limit) {
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE())
      return
    }
    const shape = new JsonShape(request.routeOptions.config.bodyBounds)
    const chunks: Buffer[] = []
    let received = 0
    const finish = (error: Error | null, text?: string) => {
      payload.removeListener('data', onData)
      payload.removeListener('end', onEnd)
      payload.removeListener('error', onError)
      if (error !== null) done(error)
      else parse(request, text ?? '', done)
    }
    function onData(chunk: Buffer) {
      received += chunk.length
      if (received > limit) return finish(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE())
      const exceeded = shape.feed(chunk)
      if (exceeded !== null) return finish(new ServiceError('VALIDATION_FAILED', {}, [{ field: 'body', message: exceeded }]))
      chunks.push(chunk)
    }
    function onEnd() {
      if (!Number.isNaN(declared) && received !== declared) return finish(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH())
      finish(null, Buffer.concat(chunks, received).toString('utf8'))
    }
    function onError(error: Error & { statusCode?: number }) {
      // An aborted or broken upload is the client's doing.
      if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400
      finish(error)
    }
    payload.on('data', onData)
    payload.on('end', onEnd)
    payload.on('error', onError)
    payload.resume()
  }
}
