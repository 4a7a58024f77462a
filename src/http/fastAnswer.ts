import type { IncomingMessage, ServerResponse } from 'node:http'
import { acceptedClientRequestId, nextRequestId } from './requestId.js'

/** Writes a fast path's answer with the headers every answer of the service has. */
export type FastAnswer = (request: IncomingMessage, response: ServerResponse, status: number, headers: Record<string, string>, body: string | Buffer) => void

/**
 * The answer of a request served outside Fastify, with the service's
 * headers as its onSend hooks set them: `x-request-id` (the client's when
 * it is a safe token, else ours), `nosniff`, `x-policy-revision`.
 */
export function fastAnswer(replica: { readonly revisionText: string }): FastAnswer {
  return (request, response, status, headers, body) => {
    headers['x-request-id'] = acceptedClientRequestId(request.headers['x-request-id']) ?? nextRequestId()
    // rawAnswers.ts's NOSNIFF, spelt out: importing it would make a cycle through app.ts.
    headers['x-content-type-options'] = 'nosniff'
    headers['x-policy-revision'] = replica.revisionText
    if (status !== 204) headers['content-length'] = String(Buffer.byteLength(body))
    response.writeHead(status, headers)
    response.end(body)
  }
}
