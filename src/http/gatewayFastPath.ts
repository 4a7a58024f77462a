import type { IncomingMessage, ServerResponse } from 'node:http'
import type { RouteMap } from '../domain/routeMap.js'
import { isDomainName, isPermissionPart } from '../domain/identifiers.js'
import type { Account } from '../domain/principals.js'
import { checkPermission, type CheckContext } from '../commands/permissionQueries.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import { handOver, originalRequest } from './decisionHandOver.js'
import { rawRequestId } from './serviceHeaders.js'
import { CHECK_BATCH_PATH, checkBatchFastPath } from './checkBatchFastPath.js'
import { fastAnswer } from './fastAnswer.js'
import type { FastPath } from './fastPath.js'
import { ANSWERS, VERIFY_PREFIX, forwardAuthAllows, forwardAuthPair, mappedPair, type ForwardAuthAsk } from './routes/authz.js'
import type { ServiceMetrics } from './serviceMetrics.js'
import { nextDecisionId } from '../decisionLog/decisionId.js'

export interface GatewayFastPathOptions {
  ctx: CheckContext
  routeMap: RouteMap | null
  metrics: Pick<ServiceMetrics, 'decision' | 'recorder'>
  replica: { isStale: () => boolean; readonly revisionText: string }
  /** The account a request's `Authorization` admits from memory alone, else undefined. */
  cachedAccount: (authorization: string | undefined) => Account | undefined
  /** Whether the server is stopping (check-batch answers after its body arrives, perhaps once a stop began). */
  stopping: () => boolean
  /** Where gateway decisions are handed after evaluation. */
  recorder: DecisionRecorder
}

const CHECK_PATH = '/v2/authz/check'
/** Characters that need no decoding and that no router or parser reads two ways. */
const PLAIN_URL = /^[A-Za-z0-9/_.~?=&,:-]*$/

interface PlainQuery {
  obj?: string
  act?: string
  domain?: string
}

/**
 * The query of a check or verify when it holds only `obj`, `act` and
 * `domain`, each once and well formed, with nothing to decode; else null,
 * and the request is Fastify's (whose validation answers 400 with the
 * service's envelope, and which takes `lang`, `explain`, `user_id`,
 * `min_revision`).
 */
export function plainQuery(search: string): PlainQuery | null {
  const query: PlainQuery = {}
  if (search === '') return query
  for (const pair of search.split('&')) {
    const eq = pair.indexOf('=')
    if (eq < 0) return null
    const name = pair.slice(0, eq)
    const value = pair.slice(eq + 1)
    if (name === 'obj' || name === 'act') {
      if (query[name] !== undefined || !isPermissionPart(value)) return null
      query[name] = value
    } else if (name === 'domain') {
      if (query.domain !== undefined || !isDomainName(value)) return null
      query.domain = value
    } else return null
  }
  return query
}

/**
 * The gateway's decision routes answered straight from Node's request
 * event when the request is the common case (check-batch's is in
 * checkBatchFastPath.ts): a GET with a token verified
 * before, a plain query, a policy not stale, an allowed answer (or either
 * answer of a check). The answer is the one the Fastify route gives, byte
 * for byte in body and in the service's headers (`x-request-id`, `nosniff`,
 * `x-policy-revision`), and it is counted in the same metrics. Anything else
 * (an error to answer, a token to verify, `lang`, `explain`, `user_id`,
 * `min_revision`, HEAD, a denied forward auth) is left to Fastify, so every
 * refusal keeps its envelope, locale and log line. Installed only while no
 * per-request log line would be written (CHECK_LOG_LEVEL above info) and
 * without CORS: docs/performance.md has the measured reason.
 */
export function gatewayFastPath({ ctx, routeMap, metrics, replica, cachedAccount, stopping, recorder }: GatewayFastPathOptions): FastPath {
  const checkLatency = metrics.recorder('GET', CHECK_PATH)
  const verifyLatency = metrics.recorder('GET', VERIFY_PREFIX)
  const prefixLatency = metrics.recorder('GET', `${VERIFY_PREFIX}/*`)

  const answer = fastAnswer(replica)
  const batch = checkBatchFastPath({ ctx, metrics, replica, cachedAccount, stopping, answer, recorder })

  /** An allowed forward auth answered here; a refusal is left to the route (its envelope, its hand-over). */
  const forwardAuth = (request: IncomingMessage, response: ServerResponse, account: Account, ask: ForwardAuthAsk, status: 200 | 204, started: number, original: { method: string | undefined; path: string | undefined }): boolean => {
    const decisionId = nextDecisionId()
    const requestId = rawRequestId(request)
    const source = status === 204 ? 'verify' : 'ext_authz'
    const onDecision = handOver(recorder, account, { source, decisionId, caller: null, requestId, request, ...original }, true)
    if (!forwardAuthAllows(ctx, account, ask, onDecision)) return false
    metrics.decision('verify', true)
    answer.allowed(response, status, account, decisionId, requestId)
    ;(status === 204 ? verifyLatency : prefixLatency)(status, (performance.now() - started) / 1000)
    return true
  }

  return (request, response, toFastify) => {
    const url = request.url
    if (request.method === 'POST') return url === CHECK_BATCH_PATH && batch(request, response, toFastify)
    if (request.method !== 'GET' || url === undefined || !url.startsWith('/v2/authz/')) return false
    const started = performance.now()
    const { headers } = request
    if (headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined || !PLAIN_URL.test(url)) return false
    const account = cachedAccount(headers.authorization)
    if (account === undefined || replica.isStale()) return false
    const mark = url.indexOf('?')
    const path = mark < 0 ? url : url.slice(0, mark)
    if (path === CHECK_PATH) {
      const query = plainQuery(mark < 0 ? '' : url.slice(mark + 1))
      if (query === null || query.obj === undefined || query.act === undefined) return false
      const decisionId = nextDecisionId()
      const requestId = rawRequestId(request)
      const onDecision = handOver(recorder, account, { source: 'check', decisionId, caller: null, requestId, request })
      const allowed = checkPermission(ctx, account, { obj: query.obj, act: query.act, domain: query.domain }, onDecision)
      metrics.decision('check', allowed)
      answer.json(response, decisionId, requestId, allowed ? ANSWERS.true : ANSWERS.false)
      checkLatency(200, (performance.now() - started) / 1000)
      return true
    }
    if (path === VERIFY_PREFIX) {
      const query = plainQuery(mark < 0 ? '' : url.slice(mark + 1))
      return query !== null && forwardAuth(request, response, account, forwardAuthPair(query, headers, routeMap), 204, started, originalRequest(headers))
    }
    if (path.startsWith(`${VERIFY_PREFIX}/`)) {
      const original = url.slice(VERIFY_PREFIX.length)
      return forwardAuth(request, response, account, mappedPair(routeMap, 'GET', original), 200, started, { method: 'GET', path: original })
    }
    return false
  }
}
