import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { DECISION_ID_HEADER } from '../decisionLog/decisionId.js'
import type { Account } from '../domain/principals.js'
import { acceptedClientRequestId, echoedRequestId, nextRequestId } from './requestId.js'
import { kRevisionSlot } from './symbols.js'

/**
 * The headers every answer of the service carries, whichever path writes it:
 * a route (through createFastify's onSend hook), a fast path (fastAnswer.ts),
 * or an answer given where no route runs (rawAnswers.ts, shutdown.ts). This
 * is the one place that names and fills them:
 *
 * - `x-request-id`: the client's own id when it sent an acceptable one, else ours;
 * - `x-content-type-options: nosniff`: browsers never guess a content type;
 * - `x-policy-revision`: the revision this replica's memory reflects, wherever a replica answers.
 */

/** What says which policy revision an answer reflects: the replica. */
export interface RevisionSource {
  readonly revisionText: string
}

/** Where a header goes: a Fastify reply, the object of a `writeHead`, the lines of an answer written on the socket. */
type SetHeader<T> = (target: T, name: string, value: string) => void

const REQUEST_ID = 'x-request-id'
const NO_SNIFF = 'x-content-type-options'
const REVISION = 'x-policy-revision'
const JSON_TYPE = 'application/json; charset=utf-8'

/** The one writer: every path below calls it with its own kind of target (the fast paths' lists below spell it out). */
function writeServiceHeaders<T>(target: T, set: SetHeader<T>, requestId: string, revision: RevisionSource | null): void {
  set(target, REQUEST_ID, requestId)
  set(target, NO_SNIFF, 'nosniff')
  if (revision !== null) set(target, REVISION, revision.revisionText)
}

/*
 * The fast paths' answers, as writeHead's flat list (name, value, …) of
 * fixed names: Node reads a list by index, where an object grown one
 * computed name at a time is read through a generic lookup per header. The
 * order is the routes' own: the answer's headers, then the service's, then
 * content-length.
 */

/** A fast path's JSON answer (check, check-batch): its decision id, the service's headers, its length. */
export function jsonAnswerHeaders(decisionId: string, requestId: string, revision: RevisionSource, length: number): string[] {
  return ['content-type', JSON_TYPE, DECISION_ID_HEADER, decisionId, REQUEST_ID, requestId, NO_SNIFF, 'nosniff', REVISION, revision.revisionText, 'content-length', String(length)]
}

/**
 * An allowed forward auth answered by a fast path: who the token is (and
 * its merchant), the decision id, the service's headers; `emptyBody`: a 200
 * with no content (the prefix form), else a 204.
 */
export function identityAnswerHeaders(account: Account, decisionId: string, requestId: string, revision: RevisionSource, emptyBody: boolean): string[] {
  const headers =
    account.merchant_id === null
      ? ['x-authz-user-id', account.id, DECISION_ID_HEADER, decisionId, REQUEST_ID, requestId, NO_SNIFF, 'nosniff', REVISION, revision.revisionText]
      : ['x-authz-user-id', account.id, 'x-authz-merchant-id', account.merchant_id, DECISION_ID_HEADER, decisionId, REQUEST_ID, requestId, NO_SNIFF, 'nosniff', REVISION, revision.revisionText]
  if (emptyBody) headers.push('content-length', '0')
  return headers
}

const onReply: SetHeader<FastifyReply> = (reply, name, value) => {
  reply.header(name, value)
}
const inObject: SetHeader<OutgoingHttpHeaders> = (headers, name, value) => {
  headers[name] = value
}
const asLines: SetHeader<string[]> = (lines, name, value) => {
  lines.push(`${name}: ${value}\r\n`)
}

/** The id an answer given outside Fastify carries: the client's when it is acceptable, else the next of ours. */
export function rawRequestId(request: Pick<IncomingMessage, 'headers'>): string {
  return acceptedClientRequestId(request.headers['x-request-id']) ?? nextRequestId()
}

/** A route's answer, or one Fastify sends where no hook runs (the router's refusals): on its reply. */
export function setServiceHeaders(reply: FastifyReply, revision: RevisionSource | null): void {
  writeServiceHeaders(reply, onReply, echoedRequestId(reply.request), revision)
}

/** An answer written with Node's `writeHead` (fast paths, refusals while stopping): into its headers object. */
export function addServiceHeaders(headers: OutgoingHttpHeaders, requestId: string, revision: RevisionSource | null): void {
  writeServiceHeaders(headers, inObject, requestId, revision)
}

/**
 * The headers of a route's answer that the route writes itself after
 * `reply.hijack()` (the change stream), where no onSend hook runs: what the
 * route's hooks set on its reply (cross-origin headers; helmet's are on the
 * raw response already), then the answer's own, then the service's.
 */
export function hijackedAnswerHeaders(reply: FastifyReply, own: OutgoingHttpHeaders, revision: RevisionSource | null): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) headers[name] = value
  Object.assign(headers, own)
  writeServiceHeaders(headers, inObject, echoedRequestId(reply.request), revision)
  return headers
}

/** An answer written on the socket itself (what Node's parser refuses): its header lines, each ending in CRLF. */
export function serviceHeaderLines(requestId: string): string {
  const lines: string[] = []
  writeServiceHeaders(lines, asLines, requestId, null)
  return lines.join('')
}

/** What answers the current policy revision: the replica, once the app is registered. */
interface RevisionSlot {
  replica: RevisionSource | null
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set by serviceHeaders(): where its hook reads `x-policy-revision` from. */
    [kRevisionSlot]?: RevisionSlot
  }
}

/**
 * Every answer of `fastify` gets the service's headers, from one onSend
 * hook (two hooks cost each answer one more step of Fastify's hook runner);
 * `x-policy-revision` once answerRevision() says which replica answers.
 * Once `stopping`, an answer also tells its client not to send another
 * request on this connection.
 */
export function serviceHeaders(fastify: FastifyInstance, stopping: () => boolean): void {
  const slot: RevisionSlot = { replica: null }
  fastify.decorate(kRevisionSlot, slot)
  // Callback style: an async hook would cost every request a promise.
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    setServiceHeaders(reply, slot.replica)
    if (stopping()) reply.header('connection', 'close')
    done(null, payload)
  })
}

/**
 * Every answer of `fastify` says which revision `replica` reflects. A Fastify
 * not built by createFastify() gets serviceHeaders()'s hook here, so its
 * answers carry the same headers.
 */
export function answerRevision(fastify: FastifyInstance, replica: RevisionSource): void {
  if (fastify[kRevisionSlot] === undefined) serviceHeaders(fastify, () => false)
  ;(fastify[kRevisionSlot] as RevisionSlot).replica = replica
}
