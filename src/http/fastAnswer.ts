import type { ServerResponse } from 'node:http'
import type { Account } from '../domain/principals.js'
import { identityAnswerHeaders, jsonAnswerHeaders, type RevisionSource } from './serviceHeaders.js'

/** Writes a fast path's answers with the headers a route's answer has (serviceHeaders.ts); the ids are those the path already chose. */
export interface FastAnswer {
  /** A JSON body (check, check-batch). */
  json(response: ServerResponse, decisionId: string, requestId: string, body: string | Buffer): void
  /** An allowed forward auth: 204 without a body (verify), or 200 with an empty one (its prefix form). */
  allowed(response: ServerResponse, status: 200 | 204, account: Account, decisionId: string, requestId: string): void
}

/** The answers of requests served outside Fastify, each with the headers of the route that would have answered. */
export function fastAnswer(replica: RevisionSource): FastAnswer {
  return {
    json(response, decisionId, requestId, body) {
      response.writeHead(200, jsonAnswerHeaders(decisionId, requestId, replica, Buffer.byteLength(body)))
      response.end(body)
    },
    allowed(response, status, account, decisionId, requestId) {
      response.writeHead(status, identityAnswerHeaders(account, decisionId, requestId, replica, status === 200))
      response.end()
    },
  }
}
