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
 * A place in the chain a verification found whole: the last row walked (id
 * `0` before the first row), its hash, and how many rows lead up to it.
 */
export interface ChainPoint {
  id: string
  hash: string
  rows: number
}

export const CHAIN_START: ChainPoint = { id: '0', hash: GENESIS_HASH, rows: 0 }

/**
 * Walks rows in id order from `start` (the first row, or a checkpoint an
 * earlier verification reached). An edited row no longer matches its own
 * hash; a deleted or reordered row leaves the next row pointing at a hash
 * that is not its predecessor's; rows deleted at the end leave the head
 * pointing past the last row. Returns the first problem, or null when the
 * chain is whole. Rows behind `start` are trusted, not read: only a walk
 * from CHAIN_START finds an edit there.
 */
export class ChainVerifier {
  private previous: string
  private lastId: string
  private problem: ChainProblem | null = null
  /** Rows in the chain up to the last one walked, those behind `start` included. */
  rows: number
  /** Rows this verifier was given. */
  read = 0

  constructor(start: ChainPoint = CHAIN_START) {
    this.previous = start.hash
    this.lastId = start.id
    this.rows = start.rows
  }

  push(row: StoredChainRow): ChainProblem | null {
    if (this.problem !== null) return this.problem
    this.rows++
    this.read++
    if (row.prev_hash !== this.previous) this.problem = { kind: 'broken', id: row.id }
    else if (rowHash(row.prev_hash, row) !== row.row_hash) this.problem = { kind: 'edited', id: row.id }
    this.previous = row.row_hash
    this.lastId = row.id
    return this.problem
  }

  finish(head: string): ChainProblem | null {
    if (this.problem === null && head !== this.previous) {
      this.problem = { kind: 'tail_missing', id: this.lastId === CHAIN_START.id ? null : this.lastId }
    }
    return this.problem
  }

  /** Where the walk has reached, as a checkpoint; null once a problem was found. */
  reached(): ChainPoint | null {
    return this.problem === null ? { id: this.lastId, hash: this.previous, rows: this.rows } : null
  }
}
