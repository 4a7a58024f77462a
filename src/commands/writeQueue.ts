import { randomUUID } from 'node:crypto'
import type { AuditEntry } from '../domain/audit.js'
import type { StoreChange } from '../domain/changes.js'
import { changeItemsOf } from '../domain/changeItems.js'
import { writeCommitted } from '../storage/changes.js'
import { StorageUnavailableError, isStorageUnavailable, type Database, type Queryable } from '../storage/db.js'
import { writeRoleRowsTakingAuditIds, type RoleRowWrite } from '../storage/policyRows.js'
import { LOCK_REVISION, lockedRevision } from '../storage/revision.js'
import { recordWrite } from '../storage/writeRecord.js'
import type { Replica } from '../replica/replica.js'

/** What a write's transaction decided: whether it changed anything, its audit entries and what it changed. */
export interface PlannedWrite<T> {
  changed: boolean
  audit: AuditEntry[]
  /** Applied to memory after the commit, here and (through the change feed) on every other replica. */
  changes: StoreChange[]
  /** Runs after the commit and the memory changes, in this process only. */
  afterCommit?: () => void | Promise<void>
  result: T
}

export interface WriteOutcome<T> {
  changed: boolean
  revision: number
  result: T
}

/** How often a write whose COMMIT went unanswered asks whether it landed, and for how long. */
const SETTLE_RETRY_MS = 250

/**
 * The most writes one transaction takes. Each write of a shared transaction
 * runs in a savepoint, and PostgreSQL keeps the ids of a transaction's first
 * 64 subtransactions in shared memory: past that, every other session's
 * snapshot reads pg_subtrans while the transaction runs.
 */
export const MAX_SHARED_WRITES = 64

export interface RunOptions<T> {
  /**
   * The write may share its transaction with other writes queued with it
   * (group commit). Only for a write whose transaction reads the database
   * alone, never memory: memory takes a shared transaction's changes only
   * after its COMMIT, so a write that read memory would not see the earlier
   * writes of its own transaction. Its work may run twice (a transaction
   * rolled back when another of its writes was refused, then run again), so
   * it must do nothing but through `tx`.
   */
  shared?: boolean
  /**
   * A shared write that is one role row and nothing else (its work would
   * write that row and plan this): shared transactions write a run of such
   * writes in one multi-row statement instead of a statement each. Its work
   * still runs when the transaction is run again with savepoints.
   */
  row?: RoleRowWrite & { planned: (changed: boolean) => PlannedWrite<T> }
}

type Work<T> = (tx: Queryable) => Promise<PlannedWrite<T>>

interface Queued {
  work: Work<unknown>
  shared: boolean
  row: RunOptions<unknown>['row']
  resolve: (outcome: WriteOutcome<unknown>) => void
  reject: (error: unknown) => void
}

/** One write of a transaction: what its work planned, or why it was refused (its savepoint rolled back). */
type Planned = { queued: Queued; planned: PlannedWrite<unknown> } | { queued: Queued; error: unknown }

interface Committed {
  planned: Planned[]
  revision: number
}

/**
 * The one path every write takes: its rows, its audit entries, the revision
 * bump and its change-feed row in one transaction; then, only after the
 * commit, the same changes in memory. Writes of this process run one
 * transaction at a time; the revision row lock orders them with every other
 * replica's. Shared writes queued while a transaction is in flight go
 * together in the next one (group commit), taken once it holds the lock: one after another, each in a
 * savepoint of its own, so a refusal undoes that write alone; then one
 * revision, their audit rows in queue order, one change-feed row, one
 * COMMIT, memory once, and each caller gets its own outcome.
 */
export class WriteQueue {
  private readonly queue: Queued[] = []
  private draining = false

  constructor(
    private readonly db: Database,
    private readonly replica: Replica,
    private readonly settleWindowMs = 5000,
    /** CHANGE_RETENTION_DAYS: how long the change stream lists a change. */
    private readonly changeRetentionDays = 7,
  ) {}

  /** Writes queued behind the transaction in flight. */
  get waiting(): number {
    return this.queue.length
  }

  run<T>(work: Work<T>, options: RunOptions<T> = {}): Promise<WriteOutcome<T>> {
    return new Promise<WriteOutcome<T>>((resolve, reject) => {
      const shared = options.shared === true
      this.queue.push({ work, shared, row: shared ? options.row : undefined, resolve: resolve as Queued['resolve'], reject })
      if (!this.draining) void this.drain()
    })
  }

  private async drain(): Promise<void> {
    this.draining = true
    try {
      // Requests read in the same turn of the event loop reach the queue before this: they share the first transaction too.
      await new Promise<void>((resolve) => setImmediate(resolve))
      while (this.queue.length > 0) await this.execute()
    } finally {
      this.draining = false
    }
  }

  /** The next transaction's writes: one that is not shared alone, else the shared ones at the head of the queue, in order. */
  private next(): Queued[] {
    const first = this.queue.shift()
    if (first === undefined) return []
    const batch = [first]
    if (!first.shared) return batch
    while (batch.length < MAX_SHARED_WRITES && this.queue[0]?.shared === true) batch.push(this.queue.shift() as Queued)
    return batch
  }

  /**
   * Runs the next transaction's writes and answers each; never throws. Its
   * writes are taken from the queue once the transaction holds the revision
   * lock, not before: while it waits for another replica's transaction, the
   * writes arriving meanwhile join it instead of waiting for a lock of their
   * own. Shared writes first run without savepoints (a round trip fewer
   * each); when one is refused, that transaction is rolled back whole and the
   * same writes run again, each in a savepoint, so the refusal undoes that
   * write alone.
   */
  private async execute(): Promise<void> {
    let batch: Queued[] | null = null
    const take = (): readonly Queued[] => (batch ??= this.next())
    let outcome: Committed
    try {
      outcome = await this.commit(take, false).catch((error: unknown) => {
        if (error !== ONE_REFUSED) throw error
        return this.commit(take, true)
      })
    } catch (error) {
      // Failed before it held the lock (BEGIN refused): the writes it would have taken fail with it.
      for (const queued of take()) queued.reject(error)
      return
    }
    await this.answer(outcome.planned, outcome.revision)
  }

  /** One transaction of the writes `take` gives once the lock is held: committed (or found committed after an unanswered COMMIT), or thrown. */
  private async commit(take: () => readonly Queued[], isolated: boolean): Promise<Committed> {
    const writeId = randomUUID()
    let attempted: Committed | null = null
    try {
      return await this.db.transaction(
        async (tx, opened) => {
          const locked = lockedRevision(opened)
          const { planned, auditIds } = await planAll(tx, take(), isolated)
          const changed = planned.flatMap((p) => ('planned' in p && p.planned.changed ? [p.planned] : []))
          if (changed.length === 0) return { planned, revision: locked.revision }
          // The row is locked: nothing else moves the revision or the chain's head until this transaction ends.
          const revision = locked.revision + 1
          await recordWrite(tx, {
            revision,
            head: locked.head,
            writeId,
            audit: changed.flatMap((p) => p.audit),
            auditIds,
            changes: changed.flatMap((p) => p.changes),
            // Each write's items from its own entries and changes: two writes of one transaction may name the same row.
            items: changed.flatMap((p) => changeItemsOf(p.audit, p.changes)),
            retentionDays: this.changeRetentionDays,
          })
          attempted = { planned, revision }
          return attempted
        },
        { opening: LOCK_REVISION },
      )
    } catch (error) {
      if (!(error instanceof StorageUnavailableError) || error.inDoubtUntil === null || attempted === null) throw error
      // The COMMIT went out and no answer came back: find out whether it landed before answering.
      if (!(await this.settle(writeId, error.inDoubtUntil))) throw error
      return attempted
    }
  }

  /** After the commit: memory once for the whole transaction, then each write's own follow-up and answer, in order. */
  private async answer(planned: readonly Planned[], revision: number): Promise<void> {
    const changes = planned.flatMap((p) => ('planned' in p && p.planned.changed ? p.planned.changes : []))
    let applied: unknown = null
    if (changes.length > 0) {
      try {
        await this.replica.applyCommitted(revision, changes)
      } catch (error) {
        applied = error
      }
    }
    for (const p of planned) {
      if ('error' in p) {
        p.queued.reject(p.error)
        continue
      }
      const write = p.planned
      try {
        if (applied !== null && write.changed) throw applied
        await write.afterCommit?.()
        p.queued.resolve({ changed: write.changed, revision, result: write.result })
      } catch (error) {
        p.queued.reject(error)
      }
    }
  }

  /**
   * After `until` the server can no longer commit the write (its commit guard
   * refuses): from then on its change-feed row says for good whether it did.
   * False when it did not, or when the database stays out of reach.
   */
  private async settle(writeId: string, until: number): Promise<boolean> {
    await sleep(Math.max(0, until - Date.now()))
    const giveUp = Date.now() + this.settleWindowMs
    for (;;) {
      try {
        return (await writeCommitted(this.db, writeId)) !== null
      } catch {
        if (Date.now() >= giveUp) return false
        await sleep(SETTLE_RETRY_MS)
      }
    }
  }
}

/** Thrown out of a shared transaction run without savepoints when one of its writes is refused: it is run again with them. */
const ONE_REFUSED = new Error('a write of a shared transaction was refused')

/**
 * Each write's work in queue order. A write alone runs as it always did: its
 * refusal rolls the transaction back and answers it. Writes sharing a
 * transaction run one after another, so each sees exactly the rows of those
 * before it; `isolated`, each in a savepoint, so a refusal undoes that write
 * alone; otherwise a refusal ends the attempt (ONE_REFUSED), and a run of
 * role-row writes goes in one statement (rowRun). The database out of reach
 * fails them all: nothing of the transaction commits.
 */
async function planAll(tx: Queryable, batch: readonly Queued[], isolated: boolean): Promise<{ planned: Planned[]; auditIds?: string[] }> {
  const planned: Planned[] = []
  for (let i = 0; i < batch.length; ) {
    const run = isolated ? [] : rowRun(batch, i)
    if (run.length === batch.length) {
      // The whole transaction is one run: its statement also takes the audit ids, one per write (each plans one entry).
      const written = await writeRun(tx, run, batch.length, run.length)
      return { planned: written.planned, auditIds: written.auditIds }
    }
    if (run.length > 0) {
      planned.push(...(await writeRun(tx, run, batch.length, 0)).planned)
      i += run.length
      continue
    }
    const queued = batch[i++] as Queued
    // One round trip per write: the previous write's savepoint is released as the next one is taken.
    if (isolated) await tx.exec(planned.length === 0 ? 'SAVEPOINT shared_write' : 'RELEASE SAVEPOINT shared_write; SAVEPOINT shared_write')
    try {
      planned.push({ queued, planned: await queued.work(tx) })
    } catch (error) {
      if (batch.length === 1 || isStorageUnavailable(error)) throw error
      if (!isolated) throw ONE_REFUSED
      await tx.exec('ROLLBACK TO SAVEPOINT shared_write')
      planned.push({ queued, error })
    }
  }
  return { planned }
}

/**
 * The role-row writes from `start` on, up to the first that is not one or
 * whose rule came already in the run: one statement's worth. Its parts share
 * one snapshot, so a rule written twice (grant then revoke of one pair) ends
 * the run, and the second write sees the first in the next statement.
 */
function rowRun(batch: readonly Queued[], start: number): Queued[] {
  const run: Queued[] = []
  const rules = new Set<string>()
  for (const queued of batch.slice(start)) {
    if (queued.row === undefined) break
    const key = queued.row.rule.join('\u0000')
    if (rules.has(key)) break
    rules.add(key)
    run.push(queued)
  }
  return run
}

/** A run of role-row writes in one statement (with `auditIds` audit ids), each planned as its own work would have planned it; a refusal as in planAll. */
async function writeRun(tx: Queryable, run: readonly Queued[], batchSize: number, auditIds: number): Promise<{ planned: Planned[]; auditIds: string[] }> {
  let done: { changed: boolean[]; auditIds: string[] }
  try {
    done = await writeRoleRowsTakingAuditIds(
      tx,
      run.map((q) => q.row as RoleRowWrite),
      auditIds,
    )
  } catch (error) {
    if (batchSize === 1 || isStorageUnavailable(error)) throw error
    throw ONE_REFUSED
  }
  return {
    planned: run.map((queued, i) => ({ queued, planned: (queued.row as NonNullable<Queued['row']>).planned(done.changed[i] === true) })),
    auditIds: done.auditIds,
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
