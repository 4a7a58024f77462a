import { CHANGE_CHANNEL } from './changes.js'
import type { Database, Subscription } from './db.js'

export interface FeedLogger {
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
}

export interface FeedOptions {
  /** The schema whose notifications are ours (one database may hold several). */
  schema: string
  /** The reconciling poll: how often to ask the database for its revision whatever the listener says. */
  pollMs: number
  /** Called on a notification for our schema, on every (re)connection and on every poll tick. */
  onSignal: (revision: number | null) => void
  log?: FeedLogger
}

const RETRY_FIRST_MS = 100
// Short: after an outage the replica must catch up soon after the database is back, not at the next poll.
const RETRY_MAX_MS = 1000

/**
 * Keeps a LISTEN connection to the change feed open (reconnecting with
 * backoff when it drops) and a reconciling poll running. It only signals:
 * the replica reads the feed itself, from the revision it has applied, so a
 * missed or duplicated notification costs nothing but a read.
 */
export class ChangeFeedListener {
  private subscription: Subscription | null = null
  private poller: NodeJS.Timeout | null = null
  private retry: NodeJS.Timeout | null = null
  private retryMs = RETRY_FIRST_MS
  private stopped = false
  private connecting = false

  constructor(
    private readonly db: Database,
    private readonly options: FeedOptions,
  ) {}

  get listening(): boolean {
    return this.subscription !== null
  }

  start(): void {
    this.poller = setInterval(() => this.tick(), this.options.pollMs)
    this.poller.unref()
    void this.connect()
  }

  private tick(): void {
    this.options.onSignal(null)
    // A silently partitioned connection never errors by itself: a round trip shows it.
    const subscription = this.subscription
    subscription?.ping().catch((error: unknown) => {
      if (this.subscription !== subscription) return
      this.options.log?.warn({ err: error }, 'the change feed connection does not answer: reconnecting')
      void subscription.close()
    })
  }

  private async connect(): Promise<void> {
    if (this.stopped || this.connecting || this.db.listen === undefined) return
    this.connecting = true
    try {
      const subscription = await this.db.listen(CHANGE_CHANNEL, (payload) => this.onPayload(payload))
      if (this.stopped) {
        await subscription.close()
        return
      }
      if (this.retryMs !== RETRY_FIRST_MS) this.options.log?.info({}, 'the change feed is connected again: catching up')
      this.subscription = subscription
      this.retryMs = RETRY_FIRST_MS
      // Whatever was committed while we were not listening is read now.
      this.options.onSignal(null)
      void subscription.ended.then((error) => this.onEnded(subscription, error))
    } catch (error) {
      this.options.log?.warn({ err: error, retry_ms: this.retryMs }, 'cannot listen to the change feed: retrying')
      this.scheduleReconnect()
    } finally {
      this.connecting = false
    }
  }

  private onEnded(subscription: Subscription, error: Error | null): void {
    if (this.subscription === subscription) this.subscription = null
    if (this.stopped) return
    this.options.log?.warn({ err: error ?? undefined }, 'lost the change feed connection: reconnecting (the poll covers the gap)')
    this.scheduleReconnect()
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retry !== null) return
    const delay = this.retryMs
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS)
    this.retry = setTimeout(() => {
      this.retry = null
      void this.connect()
    }, delay)
    this.retry.unref()
  }

  private onPayload(payload: string): void {
    const separator = payload.lastIndexOf(':')
    if (payload.slice(0, separator) !== this.options.schema) return
    const revision = Number(payload.slice(separator + 1))
    this.options.onSignal(Number.isInteger(revision) ? revision : null)
  }

  async stop(): Promise<void> {
    this.stopped = true
    if (this.poller !== null) clearInterval(this.poller)
    if (this.retry !== null) clearTimeout(this.retry)
    const subscription = this.subscription
    this.subscription = null
    await subscription?.close()
  }
}
