import type { StoreChange } from '../domain/changes.js'
import { emptyPolicyRecord } from '../engine/adapter.js'
import { applyChange, expireDue, type InMemoryState } from '../engine/applyChange.js'
import type { EngineState } from '../engine/engine.js'
import { readFeedAfter } from '../storage/changes.js'
import type { Database, Queryable } from '../storage/db.js'
import { currentRevision } from '../storage/revision.js'

export interface ReplicaLogger {
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
}

export interface ReplicaOptions {
  /** Past this long without confirming the revision against the database, the replica counts as stale. */
  maxStalenessMs: number
  log?: ReplicaLogger
  now?: () => number
}

/** Changes read from the feed per query while catching up. */
const CATCH_UP_PAGE = 1000

interface Waiter {
  revision: number
  done: (reached: boolean) => void
}

/**
 * What this process's memory reflects of the store, and the one place that
 * changes it: its own writes after their commit, and every other replica's
 * writes read from the change feed, applied in revision order. A gap (the
 * feed pruned past us) or a failure to apply falls back to a full reload from
 * one consistent snapshot. Everything runs one task at a time, so memory moves
 * from one revision to the next and never applies two changes at once.
 */
export class Replica {
  private applied: number
  private appliedText: string
  private confirmedAt: number
  private tail: Promise<unknown> = Promise.resolve()
  private queuedSync: Promise<void> | null = null
  private waiters: Waiter[] = []
  private readonly appliedListeners = new Set<(revision: number) => void>()
  private stopped = false
  private reloadCount = 0
  private readonly now: () => number

  constructor(
    private readonly db: Database,
    private readonly memory: InMemoryState,
    private readonly engineState: (q: Queryable) => Promise<EngineState>,
    revision: number,
    private readonly options: ReplicaOptions,
  ) {
    this.now = options.now ?? Date.now
    this.applied = revision
    this.appliedText = String(revision)
    this.confirmedAt = this.now()
  }

  /** The revision memory reflects: every answer carries it (`x-policy-revision`). */
  get revision(): number {
    return this.applied
  }

  get revisionText(): string {
    return this.appliedText
  }

  /** Whether the revision has gone unconfirmed against the database for longer than the bound (fail closed). */
  isStale(): boolean {
    return this.now() - this.confirmedAt > this.options.maxStalenessMs
  }

  /** Reads waiting in `waitFor` for a revision memory has not reached yet. */
  get waitingReads(): number {
    return this.waiters.length
  }

  /** Full reloads since start (a gap in the feed, a failed in-place change, an operator's). */
  get reloads(): number {
    return this.reloadCount
  }

  /** Milliseconds since the revision was last confirmed against the database. */
  get lagMs(): number {
    return this.now() - this.confirmedAt
  }

  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const next = this.tail.then(task)
    this.tail = next.catch(() => undefined)
    return next
  }

  /** This process's own write, right after its commit at `revision`. */
  applyCommitted(revision: number, changes: readonly StoreChange[]): Promise<void> {
    return this.exclusive(async () => {
      if (revision <= this.applied) return
      if (revision === this.applied + 1) {
        await this.applyOrReload(revision, changes)
        return
      }
      // Other replicas' commits came first: read them from the feed, ours comes with them.
      try {
        await this.catchUp()
      } catch (error) {
        this.options.log?.warn({ err: error, revision }, 'could not read the change feed after a write; applying the write alone for now')
      }
      if (revision <= this.applied) return
      // The feed is out of reach: apply our own write so this process reads it
      // (every change is absolute), without claiming the revisions in between.
      try {
        await this.applyChanges(changes)
      } catch {
        // The next sync replays the feed over it, or reloads.
      }
      void this.sync().catch(() => undefined)
    })
  }

  /**
   * Reads the feed up to the database's current revision and applies it, then
   * counts the revision as confirmed. Calls made while one is queued share it.
   */
  sync(): Promise<void> {
    if (this.stopped) return Promise.resolve()
    if (this.queuedSync !== null) return this.queuedSync
    const queued = this.exclusive(async () => {
      this.queuedSync = null
      await this.catchUp()
    })
    this.queuedSync = queued
    return queued
  }

  /** Loads everything again from one snapshot (tests, operators, and the fallback on a gap). */
  reload(): Promise<void> {
    return this.exclusive(() => this.reloadNow())
  }

  /** Takes the overrides whose instant has passed out of memory's decisions (the shadow's too), in turn with every other change; returns their rows. */
  expireDue(): Promise<Array<readonly string[]>> {
    return this.exclusive(() => expireDue(this.memory))
  }

  /** Runs `task` with memory not moving meanwhile. */
  hold<T>(task: () => Promise<T>): Promise<T> {
    return this.exclusive(task)
  }

  /**
   * Resolves true once memory reflects `revision`, false after `timeoutMs`
   * (read-your-writes: a reader asks for at least the revision its write got).
   */
  waitFor(revision: number, timeoutMs: number): Promise<boolean> {
    if (this.applied >= revision) return Promise.resolve(true)
    // The notification may not have arrived yet: ask the feed now.
    void this.sync().catch(() => undefined)
    return new Promise((resolve) => {
      const waiter: Waiter = {
        revision,
        done: (reached) => {
          clearTimeout(timer)
          this.waiters = this.waiters.filter((w) => w !== waiter)
          resolve(reached)
        },
      }
      const timer = setTimeout(() => waiter.done(false), timeoutMs)
      this.waiters.push(waiter)
    })
  }

  /** Calls `listener` each time memory reaches a newer revision (the change stream follows this); returns its removal. */
  onApplied(listener: (revision: number) => void): () => void {
    this.appliedListeners.add(listener)
    return () => this.appliedListeners.delete(listener)
  }

  /** Ends every wait and every further sync (shutdown). */
  stop(): void {
    this.stopped = true
    for (const waiter of [...this.waiters]) waiter.done(false)
  }

  private setApplied(revision: number): void {
    this.applied = revision
    this.appliedText = String(revision)
    for (const listener of this.appliedListeners) listener(revision)
    if (this.waiters.length === 0) return
    for (const waiter of this.waiters.filter((w) => w.revision <= revision)) waiter.done(true)
  }

  /** Applies the feed up to the store's revision as first read (the head and the first page come in one round trip). */
  private async catchUp(): Promise<void> {
    let head: number | null = null
    do {
      const page = await readFeedAfter(this.db, this.applied, CATCH_UP_PAGE)
      head ??= page.head
      if (this.applied >= head) break
      if (page.rows === null) {
        this.options.log?.warn({ revision: this.applied, head }, 'the change feed no longer holds the next revision: reloading the whole policy')
        await this.reloadNow()
        return
      }
      for (const row of page.rows) {
        if (!(await this.applyOrReload(row.revision, row.changes))) return
      }
    } while (this.applied < head)
    this.confirmedAt = this.now()
  }

  /** Applies one revision's changes; on a failure reloads everything (memory must follow the committed rows). */
  private async applyOrReload(revision: number, changes: readonly StoreChange[]): Promise<boolean> {
    try {
      await this.applyChanges(changes)
      this.setApplied(revision)
      return true
    } catch (error) {
      this.options.log?.warn({ err: error, revision }, 'applying a change in memory failed: reloading the whole policy')
      await this.reloadNow()
      return false
    }
  }

  private async applyChanges(changes: readonly StoreChange[]): Promise<void> {
    for (const change of changes) await applyChange(this.memory, change)
  }

  private async reloadNow(): Promise<void> {
    const { shadow } = this.memory
    const revision = await this.db.snapshot(async (tx) => {
      const revision = await currentRevision(tx)
      const state = await this.engineState(tx)
      // The shadow loads the rows the live engine's reload read, not a second query.
      const record = shadow ? emptyPolicyRecord() : undefined
      await this.memory.engine.reload(tx, state, record)
      if (shadow && record) await shadow.reload(record, state)
      await this.memory.accounts.load(tx)
      return revision
    })
    this.setApplied(revision)
    this.confirmedAt = this.now()
    this.reloadCount++
  }
}
