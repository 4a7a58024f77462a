import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Account } from '../domain/principals.js'
import { homeDomain } from '../domain/principals.js'
import { isDomainName } from '../domain/identifiers.js'
import type { CheckContext } from '../commands/permissionQueries.js'
import type { FastAnswer } from './fastAnswer.js'
import { checkBatchAnswer } from './checkBatchAnswer.js'
import { newSpans, readPlainBatch } from './plainBatch.js'
import type { ServiceMetrics } from './serviceMetrics.js'
import { nextDecisionId } from '../decisionLog/decisionId.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import { handOver } from './decisionHandOver.js'
import { rawRequestId } from './serviceHeaders.js'

export const CHECK_BATCH_PATH = '/v2/authz/check-batch'

/**
 * The largest body read here: 100 checks of the longest identifiers take
 * about a third of it, which leaves room for whitespace. A larger one is Fastify's
 * before a byte is read, so what this path holds per request is bounded.
 */
export const MAX_FAST_BATCH_BYTES = 64 * 1024

const JSON_TYPES = new Set(['application/json', 'application/json; charset=utf-8'])
const BYTE_COUNT = /^[1-9][0-9]{0,5}$/

export interface CheckBatchFastPathOptions {
  ctx: CheckContext
  metrics: Pick<ServiceMetrics, 'decision' | 'recorder'>
  replica: { isStale: () => boolean }
  cachedAccount: (authorization: string | undefined) => Account | undefined
  /** Whether the server is stopping: Fastify's answer then closes the connection. */
  stopping: () => boolean
  answer: FastAnswer
  recorder: DecisionRecorder
}

/**
 * Reads the whole body (at most `declared` bytes, Node's parser frames it),
 * then hands it over with the request paused, so that it can be given back
 * (unshift) for Fastify's body parser, which resumes the request, to read
 * again; nothing when the client goes before the end (no one is left to
 * answer).
 */
function readBody(request: IncomingMessage, declared: number, whole: (body: Buffer) => void): void {
  const chunks: Buffer[] = []
  let received = 0
  const stop = () => {
    request.off('data', onData)
    request.off('error', stop)
    request.off('close', stop)
  }
  function onData(chunk: Buffer) {
    chunks.push(chunk)
    received += chunk.length
    if (received < declared) return
    // Paused before its end is read: the body can still be given back (unshift) for Fastify to read.
    request.pause()
    stop()
    whole(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received))
  }
  request.on('data', onData)
  request.on('error', stop)
  request.on('close', stop)
}

/**
 * check-batch's common case answered outside Fastify: a JSON body of known
 * length within MAX_FAST_BATCH_BYTES, a token verified before, a policy not
 * stale, and a body in the plain form (plainBatch.ts: no `user_id`,
 * `explain`, `min_revision`, no query string, so no `lang`). The answer is
 * the route's byte for byte, counted in the same metrics. Whatever else is
 * decided on headers alone is left to Fastify at once (false); a body not
 * in the plain form, or a policy or token that changed while it arrived, is
 * given back to the request unread and the request to Fastify (`toFastify`),
 * which answers it as if it had read it first.
 */
export function checkBatchFastPath({ ctx, metrics, replica, cachedAccount, stopping, answer, recorder }: CheckBatchFastPathOptions) {
  const latency = metrics.recorder('POST', CHECK_BATCH_PATH)
  // Where each check's values lie, for the body being answered (one at a time: all synchronous).
  const spans = newSpans()

  /** The route's answer to a body in the plain form, written; false (nothing written) for any other. */
  const answerBatch = (request: IncomingMessage, response: ServerResponse, body: Buffer, started: number): boolean => {
    const account = cachedAccount(request.headers.authorization)
    if (account === undefined || replica.isStale() || stopping()) return false
    // checkPermissions' default domain, written unescaped: its form is checked.
    const home = homeDomain(account)
    if (!isDomainName(home)) return false
    const count = readPlainBatch(body, spans)
    if (count < 0) return false
    const decisionId = nextDecisionId()
    const requestId = rawRequestId(request)
    const onDecision = handOver(recorder, account, { source: 'check_batch', decisionId, caller: null, requestId, request })
    const { body: answered, allowed } = checkBatchAnswer(ctx, account, home, body, spans, count, onDecision)
    if (allowed > 0) metrics.decision('check_batch', true, allowed)
    if (allowed < count) metrics.decision('check_batch', false, count - allowed)
    answer.json(response, decisionId, requestId, answered)
    latency(200, (performance.now() - started) / 1000)
    return true
  }

  return (request: IncomingMessage, response: ServerResponse, toFastify: (request: IncomingMessage, response: ServerResponse) => void): boolean => {
    const { headers } = request
    const length = headers['content-length']
    const type = headers['content-type']
    if (length === undefined || !BYTE_COUNT.test(length) || headers['transfer-encoding'] !== undefined) return false
    if (type === undefined || !JSON_TYPES.has(type)) return false
    const declared = Number(length)
    if (declared > MAX_FAST_BATCH_BYTES || cachedAccount(headers.authorization) === undefined || replica.isStale()) return false
    const started = performance.now()
    readBody(request, declared, (body) => {
      let answered = false
      try {
        answered = answerBatch(request, response, body, started)
      } catch {
        // Outside Fastify a throw would end the process: the route, meeting the same, answers its 500 and logs it.
        answered = response.headersSent
      }
      if (answered) return
      request.unshift(body)
      toFastify(request, response)
    })
    return true
  }
}
