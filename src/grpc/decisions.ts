import { randomUUID } from 'node:crypto'
import type { DecisionSource } from '../decisionLog/event.js'
import type { Account } from '../domain/principals.js'

/**
 * A gRPC gateway decision, handed to `onDecision` after its answer was
 * given (the decision log's hook). `subject` is null when no account was
 * admitted (no valid token, a stale policy); `obj`, `act` and `domain` are
 * absent when no pair was reached (no route, an ambiguous path).
 */
export interface GrpcDecision {
  decisionId: string
  source: Extract<DecisionSource, 'ext_authz' | 'grpc_check'>
  subject: Account | null
  /** Set when a caller asked about another user. */
  callerId?: string
  obj?: string
  act?: string
  domain?: string
  allowed: boolean
  /** Why it was refused before any rule was read. */
  refusal?: 'unauthenticated' | 'no_route' | 'ambiguous_path' | 'stale_policy' | 'incomplete_request'
  /** ext_authz: the original request's method and path (with its query). */
  method?: string
  path?: string
}

export type OnDecision = (decision: GrpcDecision) => void

/**
 * This process's decision ids when none is injected: a random UUID's first
 * 24 characters drawn once, then a counter, as the HTTP request ids are made
 * (src/http/requestId.ts says why not a fresh UUID per decision).
 */
export function processDecisionIds(): () => string {
  const prefix = randomUUID().slice(0, 24)
  let issued = 0
  return () => {
    issued = (issued + 1) % 2 ** 48
    return prefix + issued.toString(16).padStart(12, '0')
  }
}
