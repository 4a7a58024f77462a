import { type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js'
import { forwardAuthAllows, type CheckContext } from '../commands/permissionQueries.js'
import { errorTable, type ErrorCode } from '../domain/errors.js'
import { homeDomain, type Account } from '../domain/principals.js'
import { mappedPair, type RouteMap } from '../domain/routeMap.js'
import type { Localizer } from '../i18n/index.js'
import { errorBody } from '../i18n/errorBody.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import { allowedAnswer } from './allowedAnswer.js'
import type { CheckRequestRead } from './checkRequest.js'
import { admit, grpcHandOver, grpcRefusal, type GrpcAsked } from './decisions.js'
import { errorCodeOf, grpcStatus } from './status.js'

interface HeaderValueOption {
  header: { key: string; value: string }
  append_action: number
}

interface CheckResponse {
  status: { code: number; message?: string }
  denied_response?: { status: { code: number }; headers: HeaderValueOption[]; body: string }
}

/** A refusal, or an allowed answer already encoded (allowedAnswer.ts; the service is registered withEncodedAnswers). */
type Answer = CheckResponse | Buffer

/** HeaderValueOption.HeaderAppendAction: the service's value replaces one the client sent under the same name. */
const OVERWRITE_IF_EXISTS_OR_ADD = 2

export interface ExtAuthzOptions {
  ctx: CheckContext
  routeMap: RouteMap | null
  replica: { isStale: () => boolean }
  /** The account an `authorization` header admits, by the HTTP routes' rules; throws or rejects with the refusal. */
  authenticate: (header: string | undefined) => Account | Promise<Account>
  localizer: Localizer
  decisionId: () => string
  /** Where each decision is handed after its evaluation (the decision log). */
  recorder: DecisionRecorder
}

type Headers = CheckRequestRead['headers']

function asked(decisionId: string, call: GrpcAsked['call'], headers: Headers, method: string | undefined, path: string | undefined): GrpcAsked {
  return { source: 'ext_authz', decisionId, batch: false, caller: null, call, headers, method, path }
}

function header(key: string, value: string): HeaderValueOption {
  return { header: { key, value }, append_action: OVERWRITE_IF_EXISTS_OR_ADD }
}

/**
 * Envoy's external authorization over gRPC: verify's rules, with the pair
 * from the route map applied to the request Envoy holds. The answer's
 * status says allowed (OK) or why not; a refusal carries the HTTP answer
 * Envoy gives the client (status, the localised envelope, the decision id).
 * Every refusal is a CheckResponse, never a failed call: Envoy's
 * `failure_mode_allow` lets a failed call through, and a refusal must not be.
 */
export function extAuthzService(options: ExtAuthzOptions): UntypedServiceImplementation {
  const { ctx, routeMap, replica, authenticate, localizer, decisionId, recorder } = options

  const denied = (code: ErrorCode, params: Record<string, string | number>, acceptLanguage: string | undefined, id: string): CheckResponse => {
    const body = errorBody(code, localizer.translator(localizer.negotiate(undefined, acceptLanguage)), params)
    return {
      status: { code: grpcStatus(code), message: body.response_text },
      denied_response: {
        // The error table's status, which the body's code belongs to.
        status: { code: errorTable[code].status },
        headers: [header('content-type', 'application/json; charset=utf-8'), header('x-decision-id', id)],
        body: JSON.stringify(body),
      },
    }
  }

  /** The answer for an admitted account: allowed (encoded already, allowedAnswer.ts) or why not. */
  const decide = (call: ServerUnaryCall<CheckRequestRead, Answer>, callback: sendUnaryData<Answer>, id: string, account: Account, method: string, path: string, logs: boolean): void => {
    const { headers } = call.request
    const ask = mappedPair(routeMap, method, path)
    if (ask === null || 'ambiguous' in ask) {
      callback(
        null,
        ask === null
          ? denied('PERMISSION_DENIED', { permission: 'unknown' }, headers['accept-language'], id)
          : denied('ORIGINAL_PATH_AMBIGUOUS', { reason: ask.ambiguous }, headers['accept-language'], id),
      )
      if (logs) grpcRefusal(recorder, account, asked(id, call, headers, method, path), 'no_route')
      return
    }
    const allowed = forwardAuthAllows(ctx, account, ask, logs ? grpcHandOver(recorder, account, asked(id, call, headers, method, path)) : undefined)
    callback(null, allowed ? allowedAnswer(account, id) : denied('PERMISSION_DENIED', { permission: `${ask.obj}:${ask.act}` }, headers['accept-language'], id))
  }

  /** The request is read by decodeCheckRequest (the service is registered withCheckRequestDecoder). */
  const Check = (call: ServerUnaryCall<CheckRequestRead, Answer>, callback: sendUnaryData<Answer>): void => {
    const id = decisionId()
    const { method, path, headers } = call.request
    // Nothing is built for the log unless it wants decisions at all.
    const logs = recorder.wants(false)
    if (replica.isStale()) {
      callback(null, denied('POLICY_STALE', {}, headers['accept-language'], id))
      // Logged after the answer: who asked, and the pair the route map would have asked about.
      if (logs) admit(authenticate, headers.authorization, (account) => grpcRefusal(recorder, account, asked(id, call, headers, method, path), 'stale_policy', staleAsk(account, method, path)))
      return
    }
    if (method === undefined || method === '' || path === undefined || path === '') {
      return callback(null, denied('EXT_AUTHZ_REQUEST_INCOMPLETE', {}, headers['accept-language'], id))
    }
    // Called here rather than through admit(): a token verified before is admitted at once, and the call then builds no closure.
    let admitted: Account | Promise<Account>
    try {
      admitted = authenticate(headers.authorization)
    } catch (error) {
      return refuse(callback, error, headers['accept-language'], id)
    }
    if (admitted instanceof Promise) {
      admitted.then(
        (account) => decide(call, callback, id, account, method, path, logs),
        (error: unknown) => refuse(callback, error, headers['accept-language'], id),
      )
    } else decide(call, callback, id, admitted, method, path, logs)
  }

  const refuse = (callback: sendUnaryData<Answer>, error: unknown, acceptLanguage: string | undefined, id: string): void => {
    const { code, params } = errorCodeOf(error)
    callback(null, denied(code, params, acceptLanguage, id))
  }

  /** The pair a stale refusal would have asked about, when the route map names one. */
  const staleAsk = (account: Account, method: string | undefined, path: string | undefined): { domain: string; obj: string; act: string } | undefined => {
    const ask = method === undefined || path === undefined ? null : mappedPair(routeMap, method, path)
    return ask === null || 'ambiguous' in ask ? undefined : { domain: ask.domain ?? homeDomain(account), obj: ask.obj, act: ask.act }
  }

  return { Check } as UntypedServiceImplementation
}
