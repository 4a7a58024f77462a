import type { IncomingMessage, ServerResponse } from 'node:http'
import { addServiceHeaders, rawRequestId, type RevisionSource } from './serviceHeaders.js'

/** Writes a fast path's answer with the headers every answer of the service has (`requestId`: the one the path already chose, for the decision log). */
export type FastAnswer = (
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string | Buffer,
  requestId?: string,
) => void

/** The answer of a request served outside Fastify, with the headers a route's answer has (serviceHeaders.ts). */
export function fastAnswer(replica: RevisionSource): FastAnswer {
  return (request, response, status, headers, body, requestId = rawRequestId(request)) => {
    addServiceHeaders(headers, requestId, replica)
    if (status !== 204) headers['content-length'] = String(Buffer.byteLength(body))
    response.writeHead(status, headers)
    response.end(body)
  }
}
