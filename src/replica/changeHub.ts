import { WHOLE_REVISION, readChangeItems, type AudiencedChange } from '../storage/changeItems.js'
import type { Database } from '../storage/db.js'
import type { Replica, ReplicaLogger } from './replica.js'

/** What the hub hands each new revision's items to (a change stream). */
export interface ChangeSubscriber {
  deliver(changes: readonly AudiencedChange[]): void
}

/** Items read per query while following; a page never splits a revision. */
const PAGE = 1000
/** After a failed read, how soon the next is tried (a new revision tries at once). */
const RETRY_MS = 500

/**
 * Follows this replica's revisions for every open change stream at once: each
 * time memory reaches a newer revision (its own write just committed, or
 * another replica's read from the feed) the hub reads the items up to it once,
 * for every tenant, and hands them to each subscriber, which keeps those it
 * may see. Memory only moves forward in revision order, so the items come in
 * that order, and an item is read only once it has committed.
 */
export class ChangeHub {
  private position: number | null = null
  private readonly subscribers = new Set<ChangeSubscriber>()
  private stopListening: (() => void) | null = null
  private pumping = false
  private retry: NodeJS.Timeout | null = null

  constructor(
    private readonly db: Database,
    private readonly replica: Replica,
    private readonly log?: ReplicaLogger,
  ) {}

  /**
   * From now on `subscriber` gets every item after the revision memory
   * reflects at this moment (the items up to it are the subscriber's own to
   * read). Returns its removal.
   */
  subscribe(subscriber: ChangeSubscriber): () => void {
    if (this.subscribers.size === 0) {
      this.position = this.replica.revision
      this.stopListening = this.replica.onApplied(() => this.pump())
    }
    this.subscribers.add(subscriber)
    return () => {
      this.subscribers.delete(subscriber)
      if (this.subscribers.size > 0) return
      this.stopListening?.()
      this.stopListening = null
      this.position = null
      if (this.retry !== null) clearTimeout(this.retry)
      this.retry = null
    }
  }

  get subscriberCount(): number {
    return this.subscribers.size
  }

  private pump(): void {
    if (this.pumping) return
    this.pumping = true
    this.readUpToMemory().then(
      () => {
        this.pumping = false
        // Memory moved on while the last page was read.
        if (this.position !== null && this.position < this.replica.revision) this.pump()
      },
      (error: unknown) => {
        this.pumping = false
        this.log?.warn({ err: error, revision: this.position }, 'the change stream could not read the changes: trying again')
        this.retry ??= setTimeout(() => {
          this.retry = null
          if (this.position !== null) this.pump()
        }, RETRY_MS).unref()
      },
    )
  }

  private async readUpToMemory(): Promise<void> {
    while (this.position !== null && this.position < this.replica.revision) {
      const target = this.replica.revision
      const from = this.position
      const changes = await readChangeItems(this.db, { revision: from, index: WHOLE_REVISION }, { audience: null, domain: null, upTo: target }, PAGE)
      // Everyone left while the page was read, or someone left and came back: the page belongs to no one here.
      if (this.position !== from) return
      const last = changes[changes.length - 1]
      this.position = changes.length < PAGE || last === undefined ? target : last.item.revision
      if (changes.length === 0) continue
      for (const subscriber of this.subscribers) subscriber.deliver(changes)
    }
  }
}
