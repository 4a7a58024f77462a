import { createHash } from 'node:crypto'

/** The hash before the first row. */
export const GENESIS_HASH = '0'.repeat(64)

/** Every column of an audit row that its hash covers. */
export interface ChainedContent {
  id: string
  action: string
  target_type: string
  target_id: string
  obj: string | null
  act: string | null
  domain: string | null
  merchant_id: string | null
  actor_id: string
  actor_type: string
  ip: string | null
  created_at: Date
}

/**
 * The hash of one audit row: its content in a fixed order, chained to the
 * previous row's hash, so an edited, deleted or reordered row breaks the chain.
 */
export function rowHash(prevHash: string, row: ChainedContent): string {
  const canonical = JSON.stringify([
    row.id,
    row.action,
    row.target_type,
    row.target_id,
    row.obj,
    row.act,
    row.domain,
    row.merchant_id,
    row.actor_id,
    row.actor_type,
    row.ip,
    row.created_at.getTime(),
  ])
  return createHash('sha256').update(prevHash).update('\n').update(canonical).digest('hex')
}

export interface StoredChainRow extends ChainedContent {
  prev_hash: string
  row_hash: string
}

export type ChainProblem =
  | { kind: 'edited'; id: string }
  | { kind: 'broken'; id: string }
  | { kind: 'tail_missing'; id: string | null }

/**
 * Walks rows in id order. An edited row no longer matches its own hash; a
 * deleted or reordered row leaves the next row pointing at a hash that is not
 * its predecessor's; rows deleted at the end leave the head pointing past the
 * last row. Returns the first problem, or null when the chain is whole.
 */
export class ChainVerifier {
  private previous = GENESIS_HASH
  private lastId: string | null = null
  private problem: ChainProblem | null = null
  rows = 0

  push(row: StoredChainRow): ChainProblem | null {
    if (this.problem !== null) return this.problem
    this.rows++
    if (row.prev_hash !== this.previous) this.problem = { kind: 'broken', id: row.id }
    else if (rowHash(row.prev_hash, row) !== row.row_hash) this.problem = { kind: 'edited', id: row.id }
    this.previous = row.row_hash
    this.lastId = row.id
    return this.problem
  }

  finish(head: string): ChainProblem | null {
    if (this.problem === null && head !== this.previous) this.problem = { kind: 'tail_missing', id: this.lastId }
    return this.problem
  }
}
