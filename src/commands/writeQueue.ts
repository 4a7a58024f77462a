import { randomUUID } from 'node:crypto'
import type { AuditEntry } from '../domain/audit.js'
import type { StoreChange } from '../domain/changes.js'
import { changeItemsOf } from '../domain/changeItems.js'
import { insertAudit, insertAudits } from '../storage/audit.js'
import { recordChangeItems } from '../storage/changeItems.js'
import { recordChange, writeCommitted } from '../storage/changes.js'
import { StorageUnavailableError, type Database, type Queryable } from '../storage/db.js'
import { bumpRevision, currentRevision } from '../storage/revision.js'
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
 * The one path every write takes: its rows, its audit entries, the revision
 * bump and its change-feed row in one transaction; then, only after the
 * commit, the same changes in memory. Writes of this process run one at a
 * time; the revision row lock orders them with every other replica's.
 */
export class WriteQueue {
  private tail: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly db: Database,
    private readonly replica: Replica,
    private readonly settleWindowMs = 5000,
    /** CHANGE_RETENTION_DAYS: how long the change stream lists a change. */
    private readonly changeRetentionDays = 7,
  ) {}

  run<T>(work: (tx: Queryable) => Promise<PlannedWrite<T>>): Promise<WriteOutcome<T>> {
    const next = this.tail.then(() => this.execute(work))
    this.tail = next.catch(() => undefined)
    return next
  }

  private async execute<T>(work: (tx: Queryable) => Promise<PlannedWrite<T>>): Promise<WriteOutcome<T>> {
    const writeId = randomUUID()
    let attempted: { planned: PlannedWrite<T>; revision: number } | null = null
    let outcome: { planned: PlannedWrite<T>; revision: number }
    try {
      outcome = await this.db.transaction(async (tx) => {
        const planned = await work(tx)
        if (!planned.changed) return { planned, revision: await currentRevision(tx) }
        const revision = await bumpRevision(tx)
        // A list (bulk changes, an import) in multi-row statements: one round trip per few thousand entries, not three per entry.
        if (planned.audit.length > 1) await insertAudits(tx, planned.audit)
        else for (const entry of planned.audit) await insertAudit(tx, entry)
        await recordChange(tx, revision, writeId, planned.changes)
        await recordChangeItems(tx, revision, changeItemsOf(planned.audit, planned.changes), this.changeRetentionDays)
        attempted = { planned, revision }
        return attempted
      })
    } catch (error) {
      if (!(error instanceof StorageUnavailableError) || error.inDoubtUntil === null || attempted === null) throw error
      // The COMMIT went out and no answer came back: find out whether it landed before answering.
      if (!(await this.settle(writeId, error.inDoubtUntil))) throw error
      outcome = attempted
    }
    const { planned, revision } = outcome
    if (planned.changed) await this.replica.applyCommitted(revision, planned.changes)
    await planned.afterCommit?.()
    return { changed: planned.changed, revision, result: planned.result }
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

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
