/**
 * A client's `x-request-id` is taken only when it is a short token of safe
 * characters: anything else (long, spaces, quotes, control or non-ASCII
 * characters) is ignored rather than cleaned, so logs never carry what a
 * client chose to smuggle in. HTTP and gRPC read it alike.
 */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/

/** The client's request id when it is acceptable, else undefined. */
export function acceptedClientRequestId(header: string | string[] | undefined): string | undefined {
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : undefined
}
