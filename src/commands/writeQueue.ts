import type { AuditEntry } from '../domain/audit.js'
import type { PermissionEngine } from '../engine/engine.js'
import { insertAudit } from '../storage/audit.js'
import type { Database, Queryable } from '../storage/db.js'
import { bumpRevision, currentRevision } from '../storage/revision.js'

/** A change to apply to the in-memory enforcer once its rows are committed. */
export interface MemoryChange {
  op: 'add' | 'remove'
  ptype: 'p' | 'g'
  values: string[]
}

/** What a write's transaction decided: whether it changed anything, its audit entries and memory changes. */
export interface PlannedWrite<T> {
  changed: boolean
  audit: AuditEntry[]
  memory: MemoryChange[]
  /** Runs after the commit and the memory changes (e.g. caches of accounts). */
  afterCommit?: () => void
  result: T
}

export interface WriteOutcome<T> {
  changed: boolean
  revision: number
  result: T
}

/**
 * The one path every write takes: its rows, its audit entries and the
 * revision bump in one transaction; then, only after the commit, the same
 * change in memory. Writes of this process run one at a time, so memory sees
 * them in commit order (the revision row lock orders them in the database).
 */
export class WriteQueue {
  private tail: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly db: Database,
    private readonly engine: PermissionEngine,
    private readonly reloadState: () => Promise<void>,
  ) {}

  run<T>(work: (tx: Queryable) => Promise<PlannedWrite<T>>): Promise<WriteOutcome<T>> {
    return this.exclusive(() => this.execute(work))
  }

  /** Runs `task` with no write of this process in flight (a full reload must not miss a concurrent write). */
  exclusive<T>(task: () => Promise<T>): Promise<T> {
    const next = this.tail.then(task)
    this.tail = next.catch(() => undefined)
    return next
  }

  private async execute<T>(work: (tx: Queryable) => Promise<PlannedWrite<T>>): Promise<WriteOutcome<T>> {
    const { planned, revision } = await this.db.transaction(async (tx) => {
      const planned = await work(tx)
      if (!planned.changed) return { planned, revision: await currentRevision(tx) }
      const revision = await bumpRevision(tx)
      for (const entry of planned.audit) await insertAudit(tx, entry)
      return { planned, revision }
    })
    if (planned.changed) await this.applyInMemory(planned.memory)
    planned.afterCommit?.()
    return { changed: planned.changed, revision, result: planned.result }
  }

  private async applyInMemory(changes: MemoryChange[]): Promise<void> {
    try {
      for (const change of changes) {
        if (change.op === 'add') await this.engine.addRule(change.ptype, change.values)
        else await this.engine.removeRule(change.ptype, change.values)
      }
    } catch {
      // The rows are committed; memory must follow them even if an in-place change failed.
      await this.reloadState()
    }
  }
}
