import { ChainVerifier, type ChainProblem } from '../domain/auditChain.js'
import { auditHead, iterateAuditChain } from '../storage/audit.js'
import type { Queryable } from '../storage/db.js'

export interface AuditVerification {
  rows: number
  problem: ChainProblem | null
}

/** Walks the whole audit chain; reads the head first so rows appended meanwhile do not count as tampering. */
export async function verifyAudit(db: Queryable): Promise<AuditVerification> {
  const verifier = new ChainVerifier()
  const head = await auditHead(db)
  for await (const row of iterateAuditChain(db)) {
    if (verifier.push(row) !== null) break
    if (row.row_hash === head) break
  }
  return { rows: verifier.rows, problem: verifier.finish(head) }
}

export function describeProblem(problem: ChainProblem): string {
  switch (problem.kind) {
    case 'edited':
      return `audit row ${problem.id} was edited: its content no longer matches its hash`
    case 'broken':
      return `the audit chain breaks at row ${problem.id}: a row before it was deleted or the rows were reordered`
    case 'tail_missing':
      return problem.id === null
        ? 'the audit trail is empty but the chain head records rows: rows were deleted'
        : `rows after audit row ${problem.id} were deleted: the chain head points past it`
  }
}
