import { Type, type Static } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { homeDomain, type Account } from '../../domain/principals.js'
import { isDomainName, isPermissionPart } from '../../domain/identifiers.js'
import { ServiceError } from '../../domain/errors.js'
import { mappedPair, type ForwardAuthAsk, type RouteMap } from '../../domain/routeMap.js'
import type { ServiceMetrics } from '../serviceMetrics.js'
import { explainCheck, explainChecks } from '../../commands/accessReview.js'
import { checkPermission, checkPermissions, checkSubject, type CheckContext } from '../../commands/permissionQueries.js'
import type { DecisionRecorder } from '../../decisionLog/recorder.js'
import type { DecisionSource } from '../../decisionLog/event.js'
import { handOver, handOverNoRoute, handOverRefusal, originalRequest, type AskedBy } from '../decisionHandOver.js'
import { echoedRequestId } from '../requestId.js'
import { success } from '../envelope.js'
import { DECISION_ID_HEADER, nextDecisionId } from '../../decisionLog/decisionId.js'
import { MAX_BATCH_CHECKS } from '../plainBatch.js'
import { callerOf } from '../plugins/authentication.js'
import { Act, CommandBody, Domain, Lang, MinRevision, Obj, ReadQuery, UserId, bearer, responses } from '../../schemas/common.js'
import { CheckReason, CheckResultItem } from '../../schemas/permissions.js'

const Explain = Type.Optional(Type.Boolean({ description: 'Also say why (`reason`): needs permission:read, even about oneself' }))
const CheckQuery = ReadQuery({ obj: Obj, act: Act, domain: Type.Optional(Domain), user_id: Type.Optional(UserId), explain: Explain })
/** check-batch's body. The fast path reads a subset of it (plainBatch.ts; test/http/plainBatch.test.ts compares the two). */
export const BatchBody = CommandBody(
  'check-batch',
  Type.Object(
    {
      user_id: Type.Optional(UserId),
      min_revision: MinRevision,
      explain: Explain,
      checks: Type.Array(Type.Object({ obj: Obj, act: Act, domain: Type.Optional(Domain) }, { additionalProperties: false }), {
        minItems: 1,
        maxItems: MAX_BATCH_CHECKS,
      }),
    },
    { additionalProperties: false },
  ),
  { checks: [{ obj: 'orders', act: 'refund' }, { obj: 'payouts', act: 'approve', domain: 'm-1001' }] },
)

// The two possible answers of a single check, serialised once.
export const ANSWERS = { true: JSON.stringify(success({ allowed: true })), false: JSON.stringify(success({ allowed: false })) }

const VerifyQuery = ReadQuery({ obj: Type.Optional(Obj), act: Type.Optional(Act), domain: Type.Optional(Domain) })

export const VERIFY_PREFIX = '/v2/authz/verify'

// Shared with gRPC's ext_authz, so they live below the front ends.
export { mappedPair, type ForwardAuthAsk }

/** One header's value, when it is sent once. */
function header(headers: FastifyRequest['headers'], name: string): string | undefined {
  const value = headers[name]
  return typeof value === 'string' ? value : undefined
}

/**
 * The pair a proxy's sub-request asks about: from the query, else from the
 * X-Authz-* headers, else from the route map applied to the original
 * request. Null (deny) when none says, or what it says is malformed; the
 * original path's ambiguity when the map cannot safely be asked.
 */
export function forwardAuthPair(query: Pick<Static<typeof VerifyQuery>, 'obj' | 'act' | 'domain'>, headers: FastifyRequest['headers'], routeMap: RouteMap | null): ForwardAuthAsk {
  if (query.obj !== undefined && query.act !== undefined) return { obj: query.obj, act: query.act, domain: query.domain }
  const obj = header(headers, 'x-authz-obj')
  const act = header(headers, 'x-authz-act')
  if (obj !== undefined && act !== undefined) {
    const domain = header(headers, 'x-authz-domain')
    if (!isPermissionPart(obj) || !isPermissionPart(act) || (domain !== undefined && !isDomainName(domain))) return null
    return { obj, act, domain }
  }
  const method = header(headers, 'x-original-method') ?? header(headers, 'x-forwarded-method')
  const uri = header(headers, 'x-original-uri') ?? header(headers, 'x-forwarded-uri')
  if (method === undefined || uri === undefined) return null
  return mappedPair(routeMap, method, uri)
}

/** Forward auth's decision, handed to the decision log as it is made (a `no_route` deny when there was no pair to ask about). */
export function forwardAuthDecides(ctx: CheckContext, recorder: DecisionRecorder, account: Account, ask: ForwardAuthAsk, asked: AskedBy): boolean {
  if (ask === null || 'ambiguous' in ask) {
    handOverNoRoute(recorder, account, asked)
    return false
  }
  return checkPermission(ctx, account, ask, handOver(recorder, account, asked))
}

/** Forward auth's answer: `allowed` with the identity headers for the upstream, else 403 `300` (`303` for an ambiguous path). */
function answerForwardAuth(request: FastifyRequest, reply: FastifyReply, account: Account, ask: ForwardAuthAsk, allowed: boolean, status: 200 | 204): void {
  if (ask !== null && 'ambiguous' in ask) {
    // Seldom a real client: a probe, or a proxy passing on what it should have refused.
    request.log.warn({ reason: ask.ambiguous }, `forward auth refused an ambiguous original path (${ask.ambiguous})`)
    throw new ServiceError('ORIGINAL_PATH_AMBIGUOUS', { reason: ask.ambiguous })
  }
  if (!allowed) throw new ServiceError('PERMISSION_DENIED', { permission: ask === null ? 'unknown' : `${ask.obj}:${ask.act}` })
  reply.code(status).header('x-authz-user-id', account.id)
  if (account.merchant_id !== null) reply.header('x-authz-merchant-id', account.merchant_id)
  reply.send()
}

/** A query parameter as text, when it was sent once (the query is not validated yet where a stale policy is refused). */
function text(query: unknown, name: string): string | undefined {
  const value = (query as Record<string, unknown> | undefined)?.[name]
  return typeof value === 'string' ? value : undefined
}

/** The pair a request names in its query, unvalidated. */
function queryPair(request: FastifyRequest): ForwardAuthAsk {
  const { query } = request
  const obj = text(query, 'obj')
  const act = text(query, 'act')
  return obj === undefined || act === undefined ? null : { obj, act, domain: text(query, 'domain') }
}

/**
 * A decision route's refusal on a policy not confirmed current, as a
 * decision: the answer's decision id, and a `stale_policy` event about the
 * caller (the user a check asks about is not looked up on such a policy)
 * with the pair the request names when it is well-formed (validation has
 * not run yet; a batch's body is not read yet, so it names none).
 */
function staleRefusal(recorder: DecisionRecorder, source: DecisionSource, pairOf: (request: FastifyRequest) => ForwardAuthAsk, original?: (request: FastifyRequest) => { method: string | undefined; path: string | undefined }) {
  return (request: FastifyRequest, reply: FastifyReply): void => {
    const decisionId = nextDecisionId()
    reply.header(DECISION_ID_HEADER, decisionId)
    if (!recorder.wants(false)) return
    const account = callerOf(request).account
    const ask = pairOf(request)
    const named = ask !== null && !('ambiguous' in ask) && isPermissionPart(ask.obj) && isPermissionPart(ask.act) && (ask.domain === undefined || isDomainName(ask.domain))
    const asked: AskedBy = { source, decisionId, caller: null, requestId: echoedRequestId(request), request: request.raw, ...original?.(request) }
    handOverRefusal(recorder, account, asked, 'stale_policy', named ? { domain: ask.domain ?? homeDomain(account), obj: ask.obj, act: ask.act } : undefined)
  }
}

export interface AuthzRouteOptions {
  ctx: CheckContext
  /** Gateway decisions by outcome, for /metrics (explanations are not decisions). */
  metrics: Pick<ServiceMetrics, 'decision'>
  /** The forward-auth route map, when ROUTE_MAP_PATH is set. */
  routeMap: RouteMap | null
  /** Where gateway decisions are handed after evaluation. */
  recorder: DecisionRecorder
}

/** The gateway's hot path: answers from memory only. */
export const authzRoutes: FastifyPluginAsyncTypebox<AuthzRouteOptions> = async (app, { ctx, routeMap, metrics, recorder }) => {
  app.get(
    '/v2/authz/verify',
    {
      config: {
        failClosedWhenStale: true,
        onStaleRefusal: staleRefusal(
          recorder,
          'verify',
          (request) => forwardAuthPair({ obj: text(request.query, 'obj'), act: text(request.query, 'act'), domain: text(request.query, 'domain') }, request.headers, routeMap),
          (request) => originalRequest(request.headers),
        ),
      },
      schema: {
        tags: ['authz'],
        security: bearer,
        querystring: VerifyQuery,
        response: { 204: Type.Null({ description: 'Allowed' }), 401: Type.Ref('ErrorEnvelope'), 403: Type.Ref('ErrorEnvelope') },
      },
    },
    (request, reply) => {
      const account = callerOf(request).account
      const ask = forwardAuthPair(request.query, request.headers, routeMap)
      const decisionId = nextDecisionId()
      const { method, path } = originalRequest(request.headers)
      const asked: AskedBy = { source: 'verify', decisionId, caller: null, requestId: echoedRequestId(request), request: request.raw, method, path }
      const allowed = forwardAuthDecides(ctx, recorder, account, ask, asked)
      metrics.decision('verify', allowed)
      // Set before a refusal is thrown: the error's answer keeps the headers set on the reply.
      reply.header(DECISION_ID_HEADER, decisionId)
      answerForwardAuth(request, reply, account, ask, allowed, 204)
    },
  )

  app.get(
    '/v2/authz/check',
    {
      config: { failClosedWhenStale: true, onStaleRefusal: staleRefusal(recorder, 'check', queryPair) },
      schema: {
        tags: ['authz'],
        security: bearer,
        querystring: CheckQuery,
        response: responses(200, Type.Object({ allowed: Type.Boolean(), reason: Type.Optional(CheckReason) }), [404]),
      },
    },
    // Synchronous and allocation-light: the answer is in memory, so no promise is made per check.
    (request, reply) => {
      const { query } = request
      // An explanation (the console's, an access review's) is no gateway decision: not counted.
      if (query.explain === true) {
        reply.send(success(explainCheck(ctx, callerOf(request), query.user_id, query)))
        return
      }
      const caller = callerOf(request).account
      const subject = checkSubject(ctx, callerOf(request), query.user_id)
      const decisionId = nextDecisionId()
      const onDecision = handOver(recorder, subject, { source: 'check', decisionId, caller, requestId: echoedRequestId(request), request: request.raw })
      const allowed = checkPermission(ctx, subject, query, onDecision)
      metrics.decision('check', allowed)
      reply.header(DECISION_ID_HEADER, decisionId)
      reply.type('application/json; charset=utf-8').send(allowed ? ANSWERS.true : ANSWERS.false)
    },
  )
  // Envoy's ext_authz over HTTP asks with the client's own method and with
  // the client's path and query after this prefix, and allows only on 200:
  // the pair comes from the route map alone (nothing the client sends can
  // name it), and an allowed request answers 200 with no body.
  app.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    url: '/v2/authz/verify/*',
    config: {
      failClosedWhenStale: true,
      foreignQuery: true,
      onStaleRefusal: staleRefusal(
        recorder,
        'ext_authz',
        (request) => mappedPair(routeMap, request.method, request.url.slice(VERIFY_PREFIX.length)),
        (request) => ({ method: request.method, path: request.url.slice(VERIFY_PREFIX.length) }),
      ),
    },
    schema: {
      // OpenAPI has no wildcard paths: docs/operations.md and gateway/ document this form.
      hide: true,
      tags: ['authz'],
      security: bearer,
      response: { 200: Type.Null({ description: 'Allowed' }), 401: Type.Ref('ErrorEnvelope'), 403: Type.Ref('ErrorEnvelope') },
    },
    handler: (request, reply) => {
      const account = callerOf(request).account
      const original = request.url.slice(VERIFY_PREFIX.length)
      const ask = mappedPair(routeMap, request.method, original)
      const decisionId = nextDecisionId()
      const asked: AskedBy = { source: 'ext_authz', decisionId, caller: null, requestId: echoedRequestId(request), request: request.raw, method: request.method, path: original }
      const allowed = forwardAuthDecides(ctx, recorder, account, ask, asked)
      metrics.decision('verify', allowed)
      // Set before a refusal is thrown: the error's answer keeps the headers set on the reply.
      reply.header(DECISION_ID_HEADER, decisionId)
      answerForwardAuth(request, reply, account, ask, allowed, 200)
    },
  })

  app.post(
    '/v2/authz/check-batch',
    {
      config: { failClosedWhenStale: true, minRevisionInBody: true, onStaleRefusal: staleRefusal(recorder, 'check_batch', () => null) },
      schema: {
        tags: ['authz'],
        security: bearer,
        querystring: Type.Object({ lang: Lang }),
        body: BatchBody,
        response: responses(200, Type.Object({ results: Type.Array(CheckResultItem) }), [404, 413, 415]),
      },
    },
    (request, reply) => {
      const { data } = request.body
      if (data.explain === true) {
        reply.send(success({ results: explainChecks(ctx, callerOf(request), data.user_id, data.checks) }))
        return
      }
      const caller = callerOf(request).account
      const subject = checkSubject(ctx, callerOf(request), data.user_id)
      const decisionId = nextDecisionId()
      const onDecision = handOver(recorder, subject, { source: 'check_batch', decisionId, caller, requestId: echoedRequestId(request), request: request.raw })
      const results = checkPermissions(ctx, subject, data.checks, onDecision)
      const allowedCount = results.filter((r) => r.allowed).length
      if (allowedCount > 0) metrics.decision('check_batch', true, allowedCount)
      if (allowedCount < results.length) metrics.decision('check_batch', false, results.length - allowedCount)
      reply.header(DECISION_ID_HEADER, decisionId)
      reply.send(success({ results }))
    },
  )
}
