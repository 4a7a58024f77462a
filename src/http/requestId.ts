import { randomUUID } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { acceptedClientRequestId } from '../domain/clientRequestId.js'

export { acceptedClientRequestId }

/**
 * This process's request ids: a random UUID's first 18 hex digits, drawn once
 * at start-up, then a counter in the last 12. Still shaped as a UUID (version
 * 4, its variant), unique across replicas (the prefix carries 72 random
 * bits) and within a process for 2^48 requests; a fresh random UUID per
 * request cost the gateway's check a call into the random pool and a
 * formatting for nothing more.
 */
const PROCESS_PREFIX = randomUUID().slice(0, 24)
const COUNTER_SPAN = 2 ** 48
let issued = 0

/** The next request id of this process. */
export function nextRequestId(): string {
  issued = (issued + 1) % COUNTER_SPAN
  return PROCESS_PREFIX + issued.toString(16).padStart(12, '0')
}

/**
 * The `x-request-id` an answer carries: the client's own id when it sent an
 * acceptable one (so it can match the answer to its request), else ours. The
 * log always has ours as `reqId` and theirs beside it as `client_request_id`.
 */
export function echoedRequestId(request: FastifyRequest): string {
  return acceptedClientRequestId(request.headers['x-request-id']) ?? request.id
}
