/**
 * The audit chain as plain functions: what a row's hash covers, and which
 * tampering the verifier names, on chains built in memory.
 */
import t from 'tap'
import { ChainVerifier, GENESIS_HASH, rowHash, type ChainedContent, type ChainProblem, type StoredChainRow } from '../../src/domain/auditChain.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

function content(id: number): ChainedContent {
  return {
    id: String(id),
    action: 'grant',
    target_type: 'role',
    target_id: 'clerk',
    obj: 'orders',
    act: 'refund',
    domain: 'm1',
    merchant_id: 'm1',
    actor_id: 'a0000000-0000-4000-8000-000000000001',
    actor_type: 'system_owner',
    ip: '203.0.113.7',
    created_at: new Date(Date.UTC(2030, 0, 1, 12, 0, id)),
  }
}

/** A whole chain of `length` rows, and the head the store would keep. */
function chain(length: number): { rows: StoredChainRow[]; head: string } {
  const rows: StoredChainRow[] = []
  let head = GENESIS_HASH
  for (let id = 1; id <= length; id++) {
    const row = content(id)
    const hash = rowHash(head, row)
    rows.push({ ...row, prev_hash: head, row_hash: hash })
    head = hash
  }
  return { rows, head }
}

function verify(rows: readonly StoredChainRow[], head: string): ChainProblem | null {
  const verifier = new ChainVerifier()
  for (const row of rows) verifier.push(row)
  return verifier.finish(head)
}

t.test('rowHash: the canonical form is fixed (stores already chained with it)', async (t) => {
  t.equal(rowHash(GENESIS_HASH, content(1)), '1d496c4b2dacf6a05fce5533838616a3e7b5d468ba94f522cf4549d0afc6f3dc')
})

t.test('rowHash: every column is covered, and the previous hash', async (t) => {
  const base = rowHash(GENESIS_HASH, content(1))
  const changes: Array<[string, Partial<ChainedContent>]> = [
    ['id', { id: '2' }],
    ['action', { action: 'revoke' }],
    ['target_type', { target_type: 'user' }],
    ['target_id', { target_id: 'picker' }],
    ['obj', { obj: null }],
    ['act', { act: 'read' }],
    ['domain', { domain: 'global' }],
    ['merchant_id', { merchant_id: null }],
    ['actor_id', { actor_id: 'system' }],
    ['actor_type', { actor_type: 'system' }],
    ['ip', { ip: null }],
    ['created_at', { created_at: new Date(Date.UTC(2030, 0, 1, 12, 0, 1, 1)) }],
  ]
  for (const [column, change] of changes) t.not(rowHash(GENESIS_HASH, { ...content(1), ...change }), base, column)
  t.not(rowHash('f'.repeat(64), content(1)), base, 'previous hash')
})

t.test('ChainVerifier: names the first tampering it meets', async (t) => {
  const { rows, head } = chain(4)
  const [r1, r2, r3, r4] = rows as [StoredChainRow, StoredChainRow, StoredChainRow, StoredChainRow]
  const cases: Array<[string, StoredChainRow[], string, ChainProblem | null]> = [
    ['a whole chain', rows, head, null],
    ['an empty chain at genesis', [], GENESIS_HASH, null],
    ['an edited row', [r1, { ...r2, target_id: 'super_admin' }, r3, r4], head, { kind: 'edited', id: '2' }],
    ['an edited row with its own hash recomputed: the next row no longer follows it', [r1, { ...r2, ip: null, row_hash: rowHash(r2.prev_hash, { ...r2, ip: null }) }, r3, r4], head, { kind: 'broken', id: '3' }],
    ['a row deleted in the middle', [r1, r3, r4], head, { kind: 'broken', id: '3' }],
    ['two rows swapped', [r1, r3, r2, r4], head, { kind: 'broken', id: '3' }],
    ['the first row deleted', [r2, r3, r4], head, { kind: 'broken', id: '2' }],
    ['the last row deleted: the head points past the end', [r1, r2, r3], head, { kind: 'tail_missing', id: '3' }],
    ['every row deleted', [], head, { kind: 'tail_missing', id: null }],
    ['the first of two problems is the one named', [r1, { ...r2, action: 'revoke' }, r4], head, { kind: 'edited', id: '2' }],
  ]
  for (const [name, tampered, storedHead, expected] of cases) t.strictSame(verify(tampered, storedHead), expected, name)
})

t.test('ChainVerifier: counts the rows it read', async (t) => {
  const { rows, head } = chain(3)
  const verifier = new ChainVerifier()
  for (const row of rows) verifier.push(row)
  t.equal(verifier.finish(head), null)
  t.equal(verifier.rows, 3)
})
