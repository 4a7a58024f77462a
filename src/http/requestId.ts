import type { FastifyRequest } from 'fastify'

/**
 * A client's `x-request-id` is taken only when it is a short token of safe
 * characters: anything else (long, spaces, quotes, control or non-ASCII
 * characters) is ignored rather than cleaned, so logs never carry what a
 * client chose to smuggle in.
 */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/

/** The client's request id when it is acceptable, else undefined. */
export function acceptedClientRequestId(header: string | string[] | undefined): string | undefined {
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : undefined
}

/**
 * The `x-request-id` an answer carries: the client's own id when it sent an
 * acceptable one (so it can match the answer to its request), else ours. The
 * log always has ours as `reqId` and theirs beside it as `client_request_id`.
 */
export function echoedRequestId(request: FastifyRequest): string {
  return acceptedClientRequestId(request.headers['x-request-id']) ?? request.id
}
