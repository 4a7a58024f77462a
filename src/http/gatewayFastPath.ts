import type { IncomingMessage, ServerResponse } from 'node:http'
import type { RouteMap } from '../domain/routeMap.js'
import { isDomainName, isPermissionPart } from '../domain/identifiers.js'
import type { Account } from '../domain/principals.js'
import { checkCode, checkDomain, type CheckContext } from '../commands/permissionQueries.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import { handOverDecision, originalRequest } from './decisionHandOver.js'
import { rawRequestId } from './serviceHeaders.js'
import { CHECK_BATCH_PATH, checkBatchFastPath } from './checkBatchFastPath.js'
import { fastAnswer } from './fastAnswer.js'
import type { FastPath } from './fastPath.js'
import { ANSWERS, VERIFY_PREFIX, forwardAuthPair, mappedPair, type ForwardAuthAsk } from './routes/authz.js'
import type { ServiceMetrics } from './serviceMetrics.js'
import { nextDecisionId } from '../decisionLog/decisionId.js'
import { allows } from '../engine/explain.js'

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

  /**
   * An allowed forward auth answered here; a refusal (no pair, an ambiguous
   * path, a deny) is left to the route (its envelope, its hand-over).
   * `prefixed`: the original path of the prefix form, else undefined (the
   * proxy's headers name it).
   */
  const forwardAuth = (request: IncomingMessage, response: ServerResponse, account: Account, ask: ForwardAuthAsk, status: 200 | 204, started: number, prefixed: string | undefined): boolean => {
    if (ask === null || 'ambiguous' in ask) return false
    const domain = checkDomain(account, ask.domain)
    const code = checkCode(ctx, account, domain, ask.obj, ask.act)
    if (!allows(code)) return false
    const decisionId = nextDecisionId()
    const requestId = rawRequestId(request)
    if (recorder.wants(true)) {
      const original = prefixed === undefined ? originalRequest(request.headers) : { method: 'GET', path: prefixed }
      const asked = { source: status === 204 ? ('verify' as const) : ('ext_authz' as const), decisionId, caller: null, requestId, request, ...original }
      handOverDecision(recorder, account, asked, decisionId, domain, ask.obj, ask.act, code)
    }
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
      const domain = checkDomain(account, query.domain)
      const code = checkCode(ctx, account, domain, query.obj, query.act)
      const allowed = allows(code)
      // Under DECISION_LOG=denies an allow is handed nothing and makes nothing: it costs what it costs with no log.
      if (recorder.wants(allowed)) handOverDecision(recorder, account, { source: 'check', decisionId, caller: null, requestId, request }, decisionId, domain, query.obj, query.act, code)
      metrics.decision('check', allowed)
      answer.json(response, decisionId, requestId, allowed ? ANSWERS.true : ANSWERS.false)
      checkLatency(200, (performance.now() - started) / 1000)
      return true
    }
    if (path === VERIFY_PREFIX) {
      const query = plainQuery(mark < 0 ? '' : url.slice(mark + 1))
      return query !== null && forwardAuth(request, response, account, forwardAuthPair(query, headers, routeMap), 204, started, undefined)
    }
    if (path.startsWith(`${VERIFY_PREFIX}/`)) {
      const original = url.slice(VERIFY_PREFIX.length)
      return forwardAuth(request, response, account, mappedPair(routeMap, 'GET', original), 200, started, original)
    }
    return false
  }
}
