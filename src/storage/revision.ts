import type { Queryable } from './db.js'

/**
 * Locks the store's single revision row and reads it: every write's
 * transaction takes this lock before any other row's, so transactions that
 * touch the same rows in different orders (two replicas' shared
 * transactions) queue on it instead of deadlocking.
 */
export async function lockRevision(tx: Queryable): Promise<number> {
  const { rows } = await tx.query<{ revision: string }>('SELECT revision::text AS revision FROM store_revision WHERE id = 1 FOR UPDATE')
  return Number(rows[0]?.revision ?? 0)
}

/** Bumps the revision row (locked by lockRevision first); every write that changed something calls this in its transaction. */
export async function bumpRevision(tx: Queryable): Promise<number> {
  const { rows } = await tx.query<{ revision: string }>(
    'UPDATE store_revision SET revision = revision + 1 WHERE id = 1 RETURNING revision::text AS revision',
  )
  return Number(rows[0]?.revision ?? 0)
}

export async function currentRevision(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ revision: string }>('SELECT revision::text AS revision FROM store_revision WHERE id = 1')
  return Number(rows[0]?.revision ?? 0)
}
