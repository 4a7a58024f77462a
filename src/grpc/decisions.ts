import type { Metadata } from '@grpc/grpc-js'
import type { OnDecision } from '../commands/permissionQueries.js'
import { batchItemId } from '../decisionLog/decisionId.js'
import type { DecisionSource } from '../decisionLog/event.js'
import type { DecisionRecorder } from '../decisionLog/recorder.js'
import { acceptedClientRequestId } from '../domain/clientRequestId.js'
import type { Account } from '../domain/principals.js'
import { allows } from '../engine/explain.js'

/**
 * What a gRPC call tells the decision log about itself, as HTTP's hand-over
 * reads a request: its ids, who asked, where from. Built only when the log
 * wants decisions at all (`recorder.wants(false)`), so a call pays nothing
 * for it when logging is off.
 */
export interface GrpcAsked {
  source: Extract<DecisionSource, 'grpc_check' | 'ext_authz'>
  /** The answer's decision id (a CheckBatch's items get `.<i>`). */
  decisionId: string
  batch: boolean
  /** Who asked, when the decision is about another user. */
  caller: Account | null
  call: { getPeer(): string; readonly metadata: Metadata }
  /**
   * ext_authz: the headers of the request Envoy holds, where the client's
   * `x-forwarded-for` and Envoy's `x-request-id` are; absent for
   * aps.authz.v1, whose call metadata carries them.
   */
  headers?: Readonly<Partial<Record<string, string>>> | undefined
  /** ext_authz: the original request's method and path (query and all; the recorder cuts it). */
  method?: string | undefined
  path?: string | undefined
}

function firstValue(metadata: Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0]
  return typeof value === 'string' ? value : undefined
}

/**
 * The peer's address without its port: grpc-js gives `address:port`, an
 * IPv6 address unbracketed, so the port is what follows the last colon.
 */
function peerAddress(peer: string): string {
  const colon = peer.lastIndexOf(':')
  return colon < 0 ? peer : peer.slice(0, colon)
}

/**
 * One decision handed to the recorder, read as HTTP's are: the client's
 * address from the peer and `x-forwarded-for` under TRUST_PROXY, the
 * request id the call carried when it is acceptable (none else: a gRPC
 * answer has no request id of its own to match).
 */
function record(recorder: DecisionRecorder, subject: Account, asked: GrpcAsked, id: string, domain: string, obj: string, act: string, outcome: Parameters<DecisionRecorder['decided']>[7]): void {
  const { call, headers } = asked
  const header = (name: string): string | undefined => (headers === undefined ? firstValue(call.metadata, name) : headers[name])
  const requestId = acceptedClientRequestId(header('x-request-id')) ?? ''
  recorder.decided(asked.source, id, subject, asked.caller, domain, obj, act, outcome, requestId, peerAddress(call.getPeer()), header('x-forwarded-for'), asked.method, asked.path)
}

/** The onDecision of one call's evaluations: each decision the log wants goes to `recorder` right after it is made (while the deciding row is known). */
export function grpcHandOver(recorder: DecisionRecorder, subject: Account, asked: GrpcAsked): OnDecision {
  return (index, domain, obj, act, code) => {
    if (recorder.wants(allows(code))) record(recorder, subject, asked, asked.batch ? batchItemId(asked.decisionId, index) : asked.decisionId, domain, obj, act, code)
  }
}

/** A deny made before any rule was read: no pair to ask about (`no_route`), or a policy not confirmed current (`stale_policy`, the pair when the call named one). */
export function grpcRefusal(
  recorder: DecisionRecorder,
  subject: Account,
  asked: GrpcAsked,
  outcome: 'no_route' | 'stale_policy',
  pair: { domain: string; obj: string; act: string } = { domain: '', obj: '', act: '' },
): void {
  if (recorder.wants(false)) record(recorder, subject, asked, asked.decisionId, pair.domain, pair.obj, pair.act, outcome)
}

/**
 * The account an `authorization` value admits, handed to `then` (at once
 * when the token was verified before, else when its verification settles);
 * a refusal to `otherwise`, which by default drops it (a log with no
 * subject to name).
 */
export function admit(
  authenticate: (header: string | undefined) => Account | Promise<Account>,
  header: string | undefined,
  then: (account: Account) => void,
  otherwise: (error: unknown) => void = () => undefined,
): void {
  let admitted: Account | Promise<Account>
  try {
    admitted = authenticate(header)
  } catch (error) {
    return otherwise(error)
  }
  if (admitted instanceof Promise) admitted.then(then, otherwise)
  else then(admitted)
}
