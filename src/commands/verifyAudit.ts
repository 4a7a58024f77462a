import { setImmediate as nextTurn } from 'node:timers/promises'
import { CHAIN_START, ChainVerifier, type ChainProblem } from '../domain/auditChain.js'
import { auditChainEnd, clearAuditCheckpoint, moveAuditCheckpoint, readAuditChainPage, readAuditCheckpoint } from '../storage/audit.js'
import type { Queryable } from '../storage/db.js'

/**
 * Rows read by one query and hashed before the event loop gets a turn. On
 * PGlite the query itself runs on this thread, so the page bounds the stall
 * as much as the hashing does: a couple of hundred rows cost a few milliseconds of
 * both (bench/auditVerify.ts measures the longest stall at a million rows).
 */
export const AUDIT_VERIFY_PAGE_ROWS = 250

export interface VerifyAuditOptions {
  /** From the first row, ignoring the checkpoint: finds an edit behind it. */
  full?: boolean
  pageRows?: number
}

export interface AuditVerification {
  /** Rows in the chain found whole (those behind the checkpoint included), up to the problem if any. */
  rows: number
  /** Rows this verification read and hashed. */
  read: number
  /** Whether it started from the first row rather than the checkpoint. */
  full: boolean
  /** The most rows hashed between two turns of the event loop. */
  largestSlice: number
  problem: ChainProblem | null
}

/**
 * Walks the audit chain from the checkpoint (or, when `full`, from its first
 * row) to the last row when it started, so rows appended meanwhile wait for
 * the next one. It reads keyset pages and gives the event loop a turn after
 * each, so a long trail never holds the server. A whole chain moves the
 * checkpoint forward (compare-and-set: a concurrent verification's move
 * wins, never a mix of both); a full verification that finds a problem
 * clears it, so that the repeat verifications the console asks for find
 * the problem too.
 */
export async function verifyAudit(db: Queryable, options: VerifyAuditOptions = {}): Promise<AuditVerification> {
  const full = options.full ?? true
  const pageRows = options.pageRows ?? AUDIT_VERIFY_PAGE_ROWS
  const checkpoint = await readAuditCheckpoint(db)
  const { head, lastId } = await auditChainEnd(db)
  const verifier = new ChainVerifier(full ? CHAIN_START : checkpoint)
  let after = full ? CHAIN_START.id : checkpoint.id
  let largestSlice = 0
  for (;;) {
    const page = await readAuditChainPage(db, after, pageRows, lastId)
    largestSlice = Math.max(largestSlice, page.length)
    if (page.some((row) => verifier.push(row) !== null)) break
    const last = page[page.length - 1]
    if (page.length < pageRows || last === undefined) break
    after = last.id
    await nextTurn()
  }
  const problem = verifier.finish(head)
  const reached = verifier.reached()
  if (problem !== null && full) await clearAuditCheckpoint(db)
  else if (reached !== null && BigInt(reached.id) > BigInt(checkpoint.id)) await moveAuditCheckpoint(db, checkpoint, reached)
  return { rows: verifier.rows, read: verifier.read, full, largestSlice, problem }
}

/**
 * Verifications asked for while one of the same kind is running join it
 * instead of walking the trail again: the work of many concurrent requests
 * is one walk. A joined request answers with the running walk's result,
 * which reached the last row written when that walk began.
 */
export class SharedAuditVerifications {
  private readonly running = new Map<boolean, Promise<AuditVerification>>()

  constructor(private readonly db: Queryable) {}

  run(full: boolean): Promise<AuditVerification> {
    let walk = this.running.get(full)
    if (walk === undefined) {
      walk = verifyAudit(this.db, { full }).finally(() => this.running.delete(full))
      this.running.set(full, walk)
    }
    return walk
  }
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
