import type { DecisionEvent, DecisionSink } from './event.js'
import { Fifo } from './fifo.js'

/** Why an event never reached its sink: the buffer was full (an allow or a deny pushed out), or the stop's deadline came first. */
export const DROP_REASONS = ['overflow_allow', 'overflow_deny', 'shutdown'] as const
export type DropReason = (typeof DROP_REASONS)[number]

export interface PipelineOptions {
  /** Events held for the sink at most. */
  capacity: number
  /** Events per write at most. */
  batchEvents: number
  /** How long a batch may wait to fill up before it is written (0: at once). */
  batchDelayMs: number
  /** A write not settled in this time counts as failed (its events are written again). */
  writeTimeoutMs: number
  /** Waits between failed writes: doubling from the first to the last, with jitter. */
  backoffMs: { first: number; last: number }
}

/** A failed write may say how long to wait (an HTTP receiver's Retry-After). */
export class SinkRefused extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message)
  }
}

interface PipelineLog {
  warn(obj: object, msg?: string): void
  info(obj: object, msg?: string): void
}

/**
 * `write`, failed with SinkRefused when it has not settled within `ms`. Its
 * timer is cleared once it settles: a timer left to fire for every write
 * made the process wake, and reject a promise nobody waits on, once per batch.
 */
async function within<T>(write: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SinkRefused(`no answer within ${ms} ms`)), ms)
    timer.unref()
  })
  try {
    return await Promise.race([write, expired])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * One sink's side of the log: a bounded buffer in front of it and the loop
 * that writes it in batches. When the sink cannot keep up the buffer drops
 * the oldest allows first, then the oldest denies, and counts each drop; a
 * failing or hanging write is retried after a growing wait. Nothing here
 * throws or waits on the caller's side: push() only queues.
 */
export class SinkPipeline {
  /** Events the sink took. */
  logged = 0
  readonly dropped: Record<DropReason, number> = { overflow_allow: 0, overflow_deny: 0, shutdown: 0 }
  /** Seconds each successful write took (set by whoever exports it). */
  onWritten: ((seconds: number) => void) | null = null

  private readonly allows = new Fifo<DecisionEvent>()
  private readonly denies = new Fifo<DecisionEvent>()
  private seq = 0
  private writing: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null
  private failures = 0
  private retryAt = 0
  private closed = false
  /** Events of the write under way; counted as dropped if the stop's deadline passes before it settles. */
  private inFlight = 0
  private abandoned = false

  constructor(
    readonly sink: DecisionSink,
    private readonly options: PipelineOptions,
    private readonly log: PipelineLog | null = null,
  ) {}

  get depth(): number {
    return this.allows.length + this.denies.length
  }

  push(event: DecisionEvent): void {
    if (this.closed) {
      this.dropped.shutdown++
      return
    }
    ;(event.allowed ? this.allows : this.denies).push(event, this.seq++)
    this.trim()
    this.schedule()
  }

  /** Drops the oldest allows, then the oldest denies, down to capacity. */
  private trim(): void {
    while (this.depth > this.options.capacity) {
      if (this.allows.length > 0) {
        this.allows.shift()
        this.dropped.overflow_allow++
      } else {
        this.denies.shift()
        this.dropped.overflow_deny++
      }
    }
  }

  private schedule(): void {
    if (this.writing !== null || this.timer !== null || this.depth === 0 || this.closed) return
    const now = Date.now()
    const delay = this.retryAt > now ? this.retryAt - now : this.depth >= this.options.batchEvents ? 0 : this.options.batchDelayMs
    if (delay <= 0) {
      this.writing = this.writeNext(this.options.writeTimeoutMs)
      return
    }
    this.timer = setTimeout(() => {
      this.timer = null
      // The wait is over (for company or for a retry): write what is there, however little.
      if (this.writing === null && this.depth > 0 && !this.closed) this.writing = this.writeNext(this.options.writeTimeoutMs)
    }, delay)
    // A batch waiting for company never keeps the process alive: the stop flushes it.
    this.timer.unref()
  }

  /** The next batch, oldest first across allows and denies. */
  private take(): { events: DecisionEvent[]; seqs: number[] } {
    const events: DecisionEvent[] = []
    const seqs: number[] = []
    while (events.length < this.options.batchEvents && this.depth > 0) {
      const from = this.allows.frontSeq() < this.denies.frontSeq() ? this.allows : this.denies
      seqs.push(from.frontSeq())
      events.push(from.shift() as DecisionEvent)
    }
    return { events, seqs }
  }

  private async writeNext(timeoutMs: number): Promise<void> {
    const { events, seqs } = this.take()
    this.inFlight = events.length
    const started = performance.now()
    try {
      await within(this.sink.write(events), timeoutMs)
      this.logged += events.length
      // Written after all, once the stop had given it up.
      if (this.abandoned) this.dropped.shutdown -= events.length
      this.onWritten?.((performance.now() - started) / 1000)
      if (this.failures > 0) this.log?.info({ sink: this.sink.name, failures: this.failures }, 'decision log sink writes again')
      this.failures = 0
      this.retryAt = 0
    } catch (error) {
      this.failures++
      const { first, last } = this.options.backoffMs
      const backoff = Math.min(last, first * 2 ** (this.failures - 1)) * (0.5 + Math.random() / 2)
      const asked = error instanceof SinkRefused && error.retryAfterMs !== null ? error.retryAfterMs : 0
      this.retryAt = Date.now() + Math.max(backoff, asked)
      // One line when a sink starts failing, not one per retry.
      if (this.failures === 1) this.log?.warn({ sink: this.sink.name, err: error }, 'decision log sink failed; retrying with backoff')
      // Once the stop gave this write up its events are counted as dropped: there is no later try.
      if (!this.abandoned) this.requeue(events, seqs)
    } finally {
      this.inFlight = 0
      this.abandoned = false
      this.writing = null
      this.schedule()
    }
  }

  private requeue(events: DecisionEvent[], seqs: number[]): void {
    const allows: [DecisionEvent[], number[]] = [[], []]
    const denies: [DecisionEvent[], number[]] = [[], []]
    events.forEach((event, i) => {
      const into = event.allowed ? allows : denies
      into[0].push(event)
      into[1].push(seqs[i] as number)
    })
    if (allows[0].length > 0) this.allows.unshiftAll(...allows)
    if (denies[0].length > 0) this.denies.unshiftAll(...denies)
    this.trim()
  }

  /**
   * Writes what is buffered until `deadline` (ms since the epoch), ignoring
   * the batch delay and any backoff longer than the time left; what is still
   * buffered then is dropped as `shutdown`. Then closes the sink.
   */
  async close(deadline: number): Promise<void> {
    this.closed = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    while (Date.now() < deadline) {
      if (this.writing !== null) {
        await Promise.race([this.writing, sleep(deadline - Date.now())])
        continue
      }
      if (this.depth === 0) break
      const wait = Math.min(this.retryAt, deadline) - Date.now()
      if (wait > 0) await sleep(wait)
      if (Date.now() >= deadline) break
      this.writing = this.writeNext(Math.max(1, Math.min(this.options.writeTimeoutMs, deadline - Date.now())))
    }
    this.dropped.shutdown += this.depth + this.inFlight
    this.abandoned = this.inFlight > 0
    this.allows.clear()
    this.denies.clear()
    await Promise.race([this.sink.close().catch(() => undefined), sleep(Math.max(0, deadline - Date.now()))])
  }
}

// Not unref'd: a stop waits on these, and the process must not end before the flush does.
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))
