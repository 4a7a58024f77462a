import { Metadata, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js'
import { checkPermission, checkPermissions, checkSubject, type CheckContext, type CheckQuery, type OnDecision } from '../commands/permissionQueries.js'
import { ServiceError } from '../domain/errors.js'
import { UUID_PATTERN, isDomainName, isPermissionPart } from '../domain/identifiers.js'
import { homeDomain, type Account } from '../domain/principals.js'
import type { Localizer } from '../i18n/index.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import { batchAnswer } from './batchAnswer.js'
import { admit, grpcHandOver, grpcRefusal } from './decisions.js'
import { errorCodeOf, grpcError } from './status.js'

/** aps.authz.v1 messages (proto/aps/authz/v1/authz.proto). */
interface CheckItem {
  obj?: string
  act?: string
  domain?: string
}
interface CheckRequest extends CheckItem {
  user_id?: string
}
interface CheckBatchRequest {
  user_id?: string
  checks?: CheckItem[]
}

/** check-batch's bounds (section 4): 1 to 100 questions. */
const MAX_CHECKS = 100
const USER_ID = new RegExp(UUID_PATTERN)

export interface AuthzServiceOptions {
  ctx: CheckContext
  replica: { isStale: () => boolean; readonly revisionText: string }
  authenticate: (header: string | undefined) => Account | Promise<Account>
  localizer: Localizer
  decisionId: () => string
  /** Where each decision is handed after its evaluation (the decision log). */
  recorder: DecisionRecorder
}

/** A question as check reads it, or the field that is malformed (answered as HTTP's validation answers it, `100`). */
function question(item: CheckItem, at: string): CheckQuery {
  if (item.obj === undefined || !isPermissionPart(item.obj)) throw invalid(`${at}obj`)
  if (item.act === undefined || !isPermissionPart(item.act)) throw invalid(`${at}act`)
  if (item.domain !== undefined && !isDomainName(item.domain)) throw invalid(`${at}domain`)
  return { obj: item.obj, act: item.act, domain: item.domain }
}

function invalid(field: string): ServiceError {
  return new ServiceError('VALIDATION_FAILED', {}, [{ field, message: 'pattern' }])
}

function userId(value: string | undefined): string | undefined {
  if (value !== undefined && !USER_ID.test(value)) throw invalid('user_id')
  return value
}

/** A stale Check's pair when the request names a well-formed one (the domain defaults to the caller's home). */
function stalePair(request: unknown, caller: Account): { domain: string; obj: string; act: string } | undefined {
  try {
    const query = question(request as CheckItem, '')
    return { domain: query.domain ?? homeDomain(caller), obj: query.obj, act: query.act }
  } catch {
    return undefined
  }
}

function firstValue(metadata: Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0]
  return typeof value === 'string' ? value : undefined
}

/**
 * The service's own Check and CheckBatch: section 4's questions, rules and
 * answers (the check commands the HTTP routes call), the caller's token in
 * the `authorization` metadata. A refusal is the gRPC status of its HTTP
 * status, with the localised text and the response code.
 */
export function authzService(options: AuthzServiceOptions): UntypedServiceImplementation {
  const { ctx, replica, authenticate, localizer, decisionId, recorder } = options

  /**
   * Runs one call: fail closed when stale, admit the caller, answer, or
   * refuse with the error's status. `answer` is handed the decision log's
   * onDecision, undefined when the log wants nothing.
   */
  const serve = <Req, Res>(batch: boolean, answer: (request: Req, caller: Account, id: string, log: ((subject: Account) => OnDecision) | undefined) => Res) => {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      const id = decisionId()
      const metadata = new Metadata()
      metadata.set('x-decision-id', id)
      metadata.set('x-policy-revision', replica.revisionText)
      call.sendMetadata(metadata)
      // Nothing is built for the log unless it wants decisions at all.
      const logs = recorder.wants(false)
      const refuse = (error: unknown): void => {
        const { code, params } = errorCodeOf(error)
        const t = localizer.translator(localizer.negotiate(undefined, firstValue(call.metadata, 'accept-language')))
        callback(grpcError(code, t, params))
      }
      const authorization = firstValue(call.metadata, 'authorization')
      if (replica.isStale()) {
        refuse(new ServiceError('POLICY_STALE'))
        // Logged after the answer, about the caller: the user it asked about is not looked up on a policy not confirmed current.
        if (logs) admit(authenticate, authorization, (caller) => grpcRefusal(recorder, caller, { source: 'grpc_check', decisionId: id, batch, caller, call }, 'stale_policy', batch ? undefined : stalePair(call.request, caller)))
        return
      }
      admit(
        authenticate,
        authorization,
        (caller) => {
          try {
            callback(null, answer(call.request, caller, id, logs ? (subject) => grpcHandOver(recorder, subject, { source: 'grpc_check', decisionId: id, batch, caller, call }) : undefined))
          } catch (error) {
            refuse(error)
          }
        },
        refuse,
      )
    }
  }

  const Check = serve<CheckRequest, { allowed: boolean; decision_id: string }>(false, (request, caller, id, log) => {
    const query = question(request, '')
    const subject = checkSubject(ctx, { account: caller, ip: null }, userId(request.user_id))
    return { allowed: checkPermission(ctx, subject, query, log?.(subject)), decision_id: id }
  })

  // The answer goes encoded already (batchAnswer.ts; the service is registered withEncodedAnswers).
  const CheckBatch = serve<CheckBatchRequest, Buffer>(true, (request, caller, id, log) => {
    const checks = request.checks ?? []
    if (checks.length < 1 || checks.length > MAX_CHECKS) throw new ServiceError('VALIDATION_FAILED', {}, [{ field: 'checks', message: checks.length < 1 ? 'minItems' : 'maxItems' }])
    const queries = checks.map((item, i) => question(item, `checks.${i}.`))
    const subject = checkSubject(ctx, { account: caller, ip: null }, userId(request.user_id))
    return batchAnswer(checkPermissions(ctx, subject, queries, log?.(subject)), id)
  })

  return { Check, CheckBatch } as UntypedServiceImplementation
}
