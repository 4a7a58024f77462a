import type { ReasonName } from '../engine/explain.js'
import type { Account } from '../domain/principals.js'

/** Which gateway question made a decision. */
export type DecisionSource = 'check' | 'check_batch' | 'verify' | 'grpc_check' | 'ext_authz'

/** Why a decision came out as it did: explain's kinds, `deactivated`, and the answers given before any rule is read. */
export type DecisionReasonKind = ReasonName | 'no_route' | 'stale_policy'

export interface DecisionReason {
  kind: DecisionReasonKind
  /** The Casbin row that decided, where one did. */
  rule?: string[]
}

/** Who the decision is about. */
export interface DecisionSubject {
  user_id: string
  principal_type: string
  merchant_id: string | null
  sub_role_code: string | null
}

/**
 * One gateway decision as it is logged: exactly these fields and never a
 * token, a password or any other header value. Built from the evaluation
 * that answered, after the answer was written.
 */
export interface DecisionEvent {
  decision_id: string
  /** RFC 3339 with microseconds. */
  time: string
  source: DecisionSource
  subject: DecisionSubject
  /** Who asked, when a caller asked about another user. */
  caller_id?: string
  domain: string
  obj: string
  act: string
  allowed: boolean
  reason: DecisionReason
  policy_revision: number
  /** The first 12 hex digits of the model text's SHA-256. */
  model_id: string
  replica: string
  request_id: string
  client_ip: string
  /** verify and ext_authz: the original request's method and path (its query only with DECISION_LOG_QUERY=true). */
  method?: string
  path?: string
  /** Set when the shadow model answered otherwise. */
  shadow?: { allowed: boolean; reason: DecisionReason }
}

/**
 * Where events go. A sink writes one batch at a time; the pipeline in front
 * of it buffers, drops and retries, so a sink only reports failure by
 * rejecting.
 */
export interface DecisionSink {
  /** The name in metrics and logs: `stdout`, `file`, `http`, `postgres`. */
  readonly name: string
  write(events: readonly DecisionEvent[]): Promise<void>
  close(): Promise<void>
}

/** A gateway decision as the answering evaluation left it, before it is turned into an event. */
export interface DecisionQuestion {
  /** The account the decision is about (its id, type, merchant and sub-role are the event's subject). */
  account: Account
  domain: string
  obj: string
  act: string
  allowed: boolean
  reason: DecisionReason
}

/**
 * The shadow model's side of a decision, asked after the answer was sent:
 * its answer when it disagrees with the live one, else null (also when this
 * decision is not in its sample).
 */
export interface ShadowComparer {
  /** `decisionId`, when given, is kept in the summary of disagreements (up to five per pair). */
  compare(question: DecisionQuestion, decisionId?: string): { allowed: boolean; reason: DecisionReason } | null
}
