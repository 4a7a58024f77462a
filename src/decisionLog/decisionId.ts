import { randomBytes } from 'node:crypto'

/**
 * This process's decision ids: 64 random bits drawn once at start-up (hex),
 * a dash, then a counter in base 36. Unique across replicas by the prefix
 * and within a process by the counter, and a gateway decision pays one
 * addition and a short formatting for it, not a call into the random pool.
 * No `.` appears in one: a check-batch's item i is `<id>.<i>`.
 */
const PROCESS_PREFIX = `${randomBytes(8).toString('hex')}-`
let issued = 0

/** The next decision id of this process. */
export function nextDecisionId(): string {
  // Past 2^53 the counter would stop growing; no process lives that long at any rate.
  return PROCESS_PREFIX + (++issued).toString(36)
}

/** The id of a check-batch's item `index` (from 0). */
export function batchItemId(batchId: string, index: number): string {
  return `${batchId}.${index}`
}

/** The answer's header naming the decision. */
export const DECISION_ID_HEADER = 'x-decision-id'
