import { Metadata, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js'
import { checkPermission, checkPermissions, checkSubject, type CheckContext, type CheckQuery } from '../commands/permissionQueries.js'
import { ServiceError } from '../domain/errors.js'
import { UUID_PATTERN, isDomainName, isPermissionPart } from '../domain/identifiers.js'
import type { Account } from '../domain/principals.js'
import type { Localizer } from '../i18n/index.js'
import type { OnDecision } from './decisions.js'
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
  onDecision?: OnDecision | undefined
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
  const { ctx, replica, authenticate, localizer, decisionId } = options
  const record = options.onDecision ?? (() => undefined)

  /** Runs one call: fail closed when stale, admit the caller, answer, or refuse with the error's status. */
  const serve = <Req, Res>(answer: (request: Req, caller: Account, id: string) => Res) => {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      const id = decisionId()
      const metadata = new Metadata()
      metadata.set('x-decision-id', id)
      metadata.set('x-policy-revision', replica.revisionText)
      call.sendMetadata(metadata)
      const refuse = (error: unknown): void => {
        const { code, params } = errorCodeOf(error)
        const t = localizer.translator(localizer.negotiate(undefined, firstValue(call.metadata, 'accept-language')))
        callback(grpcError(code, t, params))
      }
      const run = (caller: Account): void => {
        try {
          callback(null, answer(call.request, caller, id))
        } catch (error) {
          refuse(error)
        }
      }
      if (replica.isStale()) return refuse(new ServiceError('POLICY_STALE'))
      let admitted: Account | Promise<Account>
      try {
        admitted = authenticate(firstValue(call.metadata, 'authorization'))
      } catch (error) {
        return refuse(error)
      }
      if (admitted instanceof Promise) admitted.then(run, refuse)
      else run(admitted)
    }
  }

  const Check = serve<CheckRequest, { allowed: boolean; decision_id: string }>((request, caller, id) => {
    const query = question(request, '')
    const subject = checkSubject(ctx, { account: caller, ip: null }, userId(request.user_id))
    const allowed = checkPermission(ctx, subject, query)
    record({ decisionId: id, source: 'grpc_check', subject, ...(subject === caller ? {} : { callerId: caller.id }), ...query, domain: query.domain ?? '', allowed })
    return { allowed, decision_id: id }
  })

  const CheckBatch = serve<CheckBatchRequest, { results: ReturnType<typeof checkPermissions>; decision_id: string }>((request, caller, id) => {
    const checks = request.checks ?? []
    if (checks.length < 1 || checks.length > MAX_CHECKS) throw new ServiceError('VALIDATION_FAILED', {}, [{ field: 'checks', message: checks.length < 1 ? 'minItems' : 'maxItems' }])
    const queries = checks.map((item, i) => question(item, `checks.${i}.`))
    const subject = checkSubject(ctx, { account: caller, ip: null }, userId(request.user_id))
    const results = checkPermissions(ctx, subject, queries)
    results.forEach((result, i) =>
      record({ decisionId: `${id}.${i}`, source: 'grpc_check', subject, ...(subject === caller ? {} : { callerId: caller.id }), ...result }),
    )
    return { results, decision_id: id }
  })

  return { Check, CheckBatch } as UntypedServiceImplementation
}
