import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import type { Account } from '../domain/principals.js'
import type { OnDecision } from '../commands/permissionQueries.js'
import { batchItemId } from '../decisionLog/decisionId.js'
import type { DecisionSource } from '../decisionLog/event.js'
import type { DecisionOutcome, DecisionRecorder } from '../decisionLog/recorder.js'
import { allows } from '../engine/explain.js'

/** What a gateway request tells the decision log about itself: its ids, who asked, where from. */
export interface AskedBy {
  source: DecisionSource
  /** The answer's X-Decision-Id (a batch's items get `.<i>`). */
  decisionId: string
  /** Who asked, when the decision is about another user. */
  caller: Account | null
  /** The answer's x-request-id. */
  requestId: string
  request: Pick<IncomingMessage, 'socket' | 'headers'>
  /** verify and ext_authz: the original request's method and path (query and all; the recorder cuts it). */
  method?: string | undefined
  path?: string | undefined
}

const one = (value: string | string[] | undefined): string | undefined => (typeof value === 'string' ? value : undefined)

/** A proxy's sub-request's original method and path, as forward auth reads them. */
export function originalRequest(headers: IncomingHttpHeaders): { method: string | undefined; path: string | undefined } {
  return {
    method: one(headers['x-original-method']) ?? one(headers['x-forwarded-method']),
    path: one(headers['x-original-uri']) ?? one(headers['x-forwarded-uri']),
  }
}

/**
 * The onDecision of one gateway request: hands each decision the log
 * wants to `recorder`, nothing else (no formatting, no header read beyond
 * references). Undefined when the log wants no decision at all.
 * `allowsOnly`: a fast path that leaves a refusal to the route, which hands it over itself.
 */
export function handOver(recorder: DecisionRecorder, subject: Account, asked: AskedBy, allowsOnly = false): OnDecision | undefined {
  if (!recorder.wants(true) && (allowsOnly || !recorder.wants(false))) return undefined
  const batch = asked.source === 'check_batch'
  return (index, domain, obj, act, code) => {
    const allowed = allows(code)
    if ((allowsOnly && !allowed) || !recorder.wants(allowed)) return
    handOverDecision(recorder, subject, asked, batch ? batchItemId(asked.decisionId, index) : asked.decisionId, domain, obj, act, code)
  }
}

/**
 * One decision the log keeps (the caller asked `recorder.wants` first),
 * handed over right after its evaluation: the client's address and
 * `x-forwarded-for` are read from the request only now, so a decision
 * not kept reads nothing and makes nothing.
 */
export function handOverDecision(recorder: DecisionRecorder, subject: Account, asked: AskedBy, id: string, domain: string, obj: string, act: string, outcome: DecisionOutcome): void {
  const { source, caller, requestId, request, method, path } = asked
  recorder.decided(source, id, subject, caller, domain, obj, act, outcome, requestId, request.socket.remoteAddress, one(request.headers['x-forwarded-for']), method, path)
}

/** Forward auth that had no pair to ask about (nothing named one, no route matched, an ambiguous path): a `no_route` deny. */
export function handOverNoRoute(recorder: DecisionRecorder, subject: Account, asked: AskedBy): void {
  handOverRefusal(recorder, subject, asked, 'no_route')
}

/** A deny made before any rule was read: `no_route`, or `stale_policy` (with the pair the request named, when it named a well-formed one). */
export function handOverRefusal(
  recorder: DecisionRecorder,
  subject: Account,
  asked: AskedBy,
  outcome: 'no_route' | 'stale_policy',
  pair: { domain: string; obj: string; act: string } = { domain: '', obj: '', act: '' },
): void {
  if (recorder.wants(false)) handOverDecision(recorder, subject, asked, asked.decisionId, pair.domain, pair.obj, pair.act, outcome)
}
