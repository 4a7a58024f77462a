import { promisify } from 'node:util'
import { gzip } from 'node:zlib'
import type { DecisionEvent, DecisionSink } from './event.js'
import { SinkRefused } from './pipeline.js'

const gzipped = promisify(gzip)

export interface HttpSinkOptions {
  /** Uncompressed bytes of one POST's JSON array at most (a single larger event goes alone). */
  maxBytes: number
  /** One POST not answered in this time is abandoned (and its batch retried). */
  timeoutMs: number
}

/** Retry-After as milliseconds: delay-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null) return null
  const text = header.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  const at = Date.parse(text)
  return Number.isNaN(at) ? null : Math.max(0, at - now)
}

/** The events' JSON texts cut into arrays of at most `maxBytes` bytes each. */
function arrays(events: readonly DecisionEvent[], maxBytes: number): string[] {
  const bodies: string[] = []
  let body = ''
  for (const event of events) {
    const text = JSON.stringify(event)
    if (body !== '' && Buffer.byteLength(body) + text.length + 2 > maxBytes) {
      bodies.push(`[${body}]`)
      body = ''
    }
    body = body === '' ? text : `${body},${text}`
  }
  if (body !== '') bodies.push(`[${body}]`)
  return bodies
}

/**
 * `http:<url>`: each batch POSTed as a gzip-compressed JSON array (several
 * POSTs when it is over `maxBytes`). A 2xx is taken; anything else, or no
 * answer in time, fails the write, with the receiver's Retry-After when it
 * sends one. A batch split in several POSTs is sent again whole, so a
 * receiver may see an event twice (at-least-once; `decision_id` tells).
 */
export function httpSink(url: string, { maxBytes, timeoutMs }: HttpSinkOptions): DecisionSink {
  const inFlight = new Set<AbortController>()
  return {
    name: 'http',
    async write(events) {
      for (const body of arrays(events, maxBytes)) {
        const abort = new AbortController()
        inFlight.add(abort)
        const timer = setTimeout(() => abort.abort(), timeoutMs)
        try {
          const response = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
            body: await gzipped(body),
            signal: abort.signal,
          })
          // The body is not read, but it must be released for the connection to be reused.
          await response.body?.cancel()
          if (response.status < 200 || response.status > 299) {
            throw new SinkRefused(`the receiver answered ${response.status}`, retryAfterMs(response.headers.get('retry-after')))
          }
        } finally {
          clearTimeout(timer)
          inFlight.delete(abort)
        }
      }
    },
    async close() {
      for (const abort of inFlight) abort.abort()
    },
  }
}
