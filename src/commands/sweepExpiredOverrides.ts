import { overrideExpiredEntry, type AuditEntry } from '../domain/audit.js'
import { ruleRemoved, type StoreChange } from '../domain/changes.js'
import type { Clock, ClockTimer } from '../domain/clock.js'
import { sweepExpiredOverrides, type OverrideRow } from '../storage/overrides.js'
import type { CommandContext } from './context.js'
import type { Replica, ReplicaLogger } from '../replica/replica.js'

/** A sweep that failed (the database out of reach) is tried again this much later. */
const SWEEP_RETRY_MS = 1000
/** Rows removed per transaction by a sweep. */
const SWEEP_BATCH = 500

/**
 * The audit entry and the change of an override removed for having expired:
 * written by the sweep, or by a write that met the expired row first.
 */
export function overrideExpired(row: OverrideRow, merchantId: string | null): { audit: AuditEntry; change: StoreChange } {
  return {
    audit: overrideExpiredEntry({ kind: 'user', id: row.user_id, merchant_id: merchantId }, row),
    change: ruleRemoved('p', [row.user_id, row.domain, row.obj, row.act, row.effect]),
  }
}

/**
 * Expiring overrides, on one replica. When the soonest instant passes, the
 * override leaves this replica's decisions at once (every replica keeps its
 * own timer, so none waits for a write), and then the replica sweeps: it
 * deletes the expired rows with an `override_expired` audit entry each, in
 * one write. Replicas sweeping at the same moment each delete only rows the
 * others have not, so every expiry is audited once.
 */
export class OverrideExpiry {
  private timer: ClockTimer | null = null
  private armedAt: number | null = null
  private sweeping: Promise<number> | null = null
  /** A sweep was asked for while one ran: that one may have started before the rows it must remove expired. */
  private sweepAgain = false
  private retry: NodeJS.Timeout | null = null
  private stopped = false

  constructor(
    private readonly ctx: Pick<CommandContext, 'engine' | 'writes'>,
    private readonly replica: Pick<Replica, 'expireDue' | 'reload'>,
    private readonly clock: Clock,
    private readonly log?: ReplicaLogger,
  ) {}

  /** Arms the timer, and sweeps what expired while no replica was running. */
  start(): void {
    this.ctx.engine.watchExpiries(() => this.arm())
    this.arm()
    void this.sweep()
  }

  stop(): void {
    this.stopped = true
    this.ctx.engine.watchExpiries(null)
    this.timer?.cancel()
    if (this.retry !== null) clearTimeout(this.retry)
  }

  private arm(): void {
    if (this.stopped) return
    const next = this.ctx.engine.nextExpiry()
    if (next === this.armedAt) return
    this.timer?.cancel()
    this.armedAt = next
    this.timer = next === null ? null : this.clock.at(next, () => this.fire())
  }

  private fire(): void {
    this.armedAt = null
    this.timer = null
    // In the replica's queue: memory changes one task at a time.
    this.replica.expireDue().then(
      (expired) => {
        this.arm()
        if (expired.length > 0) void this.sweep()
      },
      (error: unknown) => {
        // Memory may now be partly changed: a reload puts it back in step with the store, which still holds the rows.
        this.log?.warn({ err: error }, 'taking expired overrides out of memory failed: reloading the policy')
        void this.replica.reload().catch(() => undefined)
      },
    )
  }

  /**
   * Deletes every expired row with its audit entry; returns how many this
   * replica removed. Calls made while a sweep runs share it, and it runs once
   * more after them.
   */
  sweep(): Promise<number> {
    if (this.sweeping !== null) {
      this.sweepAgain = true
      return this.sweeping
    }
    const run = async () => {
      let removed = 0
      do {
        this.sweepAgain = false
        removed += await this.sweepAll()
      } while (this.sweepAgain && !this.stopped)
      return removed
    }
    this.sweeping = run().finally(() => {
      this.sweeping = null
    })
    return this.sweeping
  }

  private async sweepAll(): Promise<number> {
    let removed = 0
    try {
      for (;;) {
        const outcome = await this.ctx.writes.run(async (tx) => {
          const expired = (await sweepExpiredOverrides(tx, new Date(this.clock.now()), SWEEP_BATCH)).map((row) => overrideExpired(row, row.merchant_id))
          return {
            changed: expired.length > 0,
            audit: expired.map((e) => e.audit),
            changes: expired.map((e) => e.change),
            result: expired.length,
          }
        })
        removed += outcome.result
        if (outcome.result < SWEEP_BATCH) return removed
      }
    } catch (error) {
      if (this.stopped) return removed
      this.log?.warn({ err: error }, 'could not remove expired overrides: trying again in a second (they no longer count meanwhile)')
      this.retry ??= setTimeout(() => {
        this.retry = null
        void this.sweep()
      }, SWEEP_RETRY_MS).unref()
      return removed
    }
  }
}
