import { SYSTEM_ACTOR } from '../domain/audit.js'
import { ruleRemoved } from '../domain/changes.js'
import type { Clock, ClockTimer } from '../domain/clock.js'
import { sweepExpiredOverrides } from '../storage/overrides.js'
import type { CommandContext } from './context.js'
import type { Replica, ReplicaLogger } from './replica.js'

/** A sweep that failed (the database out of reach) is tried again this much later. */
const SWEEP_RETRY_MS = 1000
/** Rows removed per transaction by a sweep. */
const SWEEP_BATCH = 500

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
  private retry: NodeJS.Timeout | null = null
  private stopped = false

  constructor(
    private readonly ctx: Pick<CommandContext, 'engine' | 'writes'>,
    private readonly replica: Pick<Replica, 'hold'>,
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
    this.timer = next === null ? null : this.clock.at(next, () => void this.fire())
  }

  private async fire(): Promise<void> {
    this.armedAt = null
    this.timer = null
    // In the replica's queue: memory changes one task at a time.
    const expired = await this.replica.hold(() => this.ctx.engine.expireDue())
    this.arm()
    if (expired.length > 0) await this.sweep()
  }

  /** Deletes every expired row with its audit entry; returns how many this replica removed. Shared while one runs. */
  sweep(): Promise<number> {
    this.sweeping ??= this.sweepAll().finally(() => {
      this.sweeping = null
    })
    return this.sweeping
  }

  private async sweepAll(): Promise<number> {
    let removed = 0
    try {
      for (;;) {
        const outcome = await this.ctx.writes.run(async (tx) => {
          const rows = await sweepExpiredOverrides(tx, new Date(this.clock.now()), SWEEP_BATCH)
          return {
            changed: rows.length > 0,
            audit: rows.map((row) => ({
              action: 'override_expired' as const,
              target_type: 'user' as const,
              target_id: row.user_id,
              obj: row.obj,
              act: row.act,
              domain: row.domain,
              merchant_id: row.merchant_id,
              actor: SYSTEM_ACTOR,
            })),
            changes: rows.map((row) => ruleRemoved('p', [row.user_id, row.domain, row.obj, row.act, row.effect])),
            result: rows.length,
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
