import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { ServiceError } from '../domain/errors.js'
import type { ChangeHub, ChangeSubscriber } from '../replica/changeHub.js'
import { isAfter, passesFilter, readChangeItems, type AudiencedChange, type ChangeCursor, type ChangeFilter, type ListedChange } from '../storage/changeItems.js'
import type { Database } from '../storage/db.js'
import type { ErrorBody } from './errors.js'

export interface ChangeStreamOptions {
  heartbeatMs: number
  maxMs: number
  bufferBytes: number
  perAddress: number
}

/** Items read per query while a new stream catches up. */
const CATCH_UP_PAGE = 500
/** A stream behind by more than this share of the bound waits for the client to read before the next catch-up page. */
const CATCH_UP_PAUSE = 0.5
/** After the last event of a stream that is too far behind, how long the client has to read it before the socket goes. */
const GOODBYE_MS = 1000

/** One server-sent event: `id: <revision>.<index>`, the item as JSON. */
export function changeEvent(item: ListedChange): string {
  return `id: ${item.revision}.${item.index}\ndata: ${JSON.stringify(item)}\n\n`
}

/**
 * Who reads a stream, asked again while it lasts: a stream opened with a
 * token must not outlive the caller's right to read.
 */
export interface StreamCaller {
  /** What a new request of the caller would be refused with now (its token logged out or expired, its account changed, the permission gone), or null. */
  refusal(): ServiceError | null
  /** The localised envelope of the error a stream ends with. */
  envelope(error: ServiceError): ErrorBody
}

/** A slot reserved for one address's stream before it is opened: released if opening fails. */
export interface StreamSlot {
  address: string
  release(): void
}

/**
 * The open change streams of this server: how many each client address
 * holds, and each stream's life (catch-up from the database, then what the
 * hub pushes, heartbeats, the bound on what a client leaves unread, the end
 * at a deadline or at shutdown).
 */
export class ChangeStreams {
  private readonly perAddress = new Map<string, number>()
  private readonly streams = new Set<ChangeStream>()
  private closing = false

  constructor(
    private readonly db: Database,
    private readonly hub: ChangeHub,
    private readonly options: ChangeStreamOptions,
  ) {}

  get open(): number {
    return this.streams.size
  }

  /** Counts a stream for `address`, or refuses it (429 `608`) when the address holds its share already. */
  reserve(address: string): StreamSlot {
    const held = this.perAddress.get(address) ?? 0
    if (held >= this.options.perAddress || this.closing) throw new ServiceError('CHANGE_STREAMS_PER_ADDRESS', { max: this.options.perAddress })
    this.perAddress.set(address, held + 1)
    let released = false
    return {
      address,
      release: () => {
        if (released) return
        released = true
        const left = (this.perAddress.get(address) ?? 1) - 1
        if (left === 0) this.perAddress.delete(address)
        else this.perAddress.set(address, left)
      },
    }
  }

  /** Starts a stream on `res` (headers already chosen) from `cursor` for `caller`. */
  start(slot: StreamSlot, res: ServerResponse, headers: OutgoingHttpHeaders, cursor: ChangeCursor, filter: ChangeFilter, caller: StreamCaller): void {
    const stream = new ChangeStream(res, cursor, filter, this.options, caller, () => {
      this.streams.delete(stream)
      slot.release()
    })
    this.streams.add(stream)
    res.writeHead(200, headers)
    // A comment first, so proxies and clients see the stream is open before any change.
    res.write(': open\n\n')
    void stream.run(this.db, this.hub)
  }

  /** Shutdown: every stream ends cleanly (the client reconnects elsewhere with Last-Event-ID); no new one opens. */
  closeAll(): void {
    this.closing = true
    for (const stream of [...this.streams]) stream.end()
  }
}

class ChangeStream implements ChangeSubscriber {
  private live = false
  private pending: AudiencedChange[] = []
  private pendingBytes = 0
  private closed = false
  private readonly timers: NodeJS.Timeout[] = []
  private unsubscribe: (() => void) | null = null

  constructor(
    private readonly res: ServerResponse,
    private cursor: ChangeCursor,
    private readonly filter: ChangeFilter,
    private readonly options: ChangeStreamOptions,
    private readonly caller: StreamCaller,
    private readonly onClosed: () => void,
  ) {
    res.on('close', () => this.finish())
  }

  async run(db: Database, hub: ChangeHub): Promise<void> {
    // Subscribed before reading: what commits while we read comes from the hub, deduplicated by the cursor.
    this.unsubscribe = hub.subscribe(this)
    this.timers.push(
      setInterval(() => {
        if (this.callerMayRead()) this.write(': heartbeat\n\n')
      }, this.options.heartbeatMs),
    )
    this.timers.push(setTimeout(() => this.end(), this.options.maxMs))
    try {
      for (;;) {
        const page = await readChangeItems(db, this.cursor, this.filter, CATCH_UP_PAGE)
        if (this.closed) return
        this.send(page.map((c) => c.item))
        if (page.length < CATCH_UP_PAGE) break
        if (this.res.writableLength > this.options.bufferBytes * CATCH_UP_PAUSE) await this.drained()
        if (this.closed) return
      }
    } catch {
      // The database went away mid catch-up: the client resumes with Last-Event-ID.
      this.end()
      return
    }
    this.live = true
    const pending = this.pending
    this.pending = []
    this.send(pending.filter((c) => passesFilter(c, this.filter)).map((c) => c.item))
  }

  deliver(changes: readonly AudiencedChange[]): void {
    if (this.closed) return
    if (!this.live) {
      for (const change of changes) {
        this.pending.push(change)
        this.pendingBytes += 200
      }
      if (this.pendingBytes > this.options.bufferBytes) this.behind()
      return
    }
    this.send(changes.filter((c) => passesFilter(c, this.filter)).map((c) => c.item))
  }

  /** Ends the stream cleanly (its deadline, shutdown). */
  end(): void {
    if (this.closed) return
    this.res.end()
    this.finish()
  }

  /** The items' events in one write: a shared transaction's revision holds dozens, and each write is a system call and a chunk of its own. */
  private send(items: readonly ListedChange[]): void {
    if (!items.some((item) => isAfter(item, this.cursor)) || !this.callerMayRead()) return
    let events = ''
    for (const item of items) {
      if (!isAfter(item, this.cursor)) continue
      events += changeEvent(item)
      this.cursor = { revision: item.revision, index: item.index }
    }
    this.write(events)
    if (this.res.writableLength > this.options.bufferBytes) this.behind()
  }

  private write(text: string): void {
    if (!this.closed) this.res.write(text)
  }

  /** Waits until the client has read what is queued, or disconnects it when it does not within a heartbeat. */
  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.behind()
        resolve()
      }, this.options.heartbeatMs)
      this.res.once('drain', () => {
        clearTimeout(timer)
        resolve()
      })
      this.res.once('close', () => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  /** Whether the caller may still read what comes; when not, the stream ends with the refusal a new request would get. */
  private callerMayRead(): boolean {
    const refusal = this.caller.refusal()
    if (refusal === null) return true
    this.lastEvent(refusal)
    return false
  }

  /** The client left too much unread: one last event it may still read, then the socket goes. */
  private behind(): void {
    this.lastEvent(new ServiceError('CHANGE_STREAM_BEHIND', { bytes: this.options.bufferBytes }))
  }

  /** One last `event: error` with the error's envelope, then the socket goes (after a moment, for a client slow to read it). */
  private lastEvent(error: ServiceError): void {
    if (this.closed) return
    this.res.write(`event: error\ndata: ${JSON.stringify(this.caller.envelope(error))}\n\n`)
    const socket = this.res.socket
    this.finish()
    const goodbye = setTimeout(() => socket?.destroy(), GOODBYE_MS).unref()
    // Read in time: the connection is the client's again (keep-alive), for its next request.
    this.res.once('finish', () => clearTimeout(goodbye))
    this.res.end()
  }

  private finish(): void {
    if (this.closed) return
    this.closed = true
    for (const timer of this.timers) clearTimeout(timer)
    this.unsubscribe?.()
    this.pending = []
    this.onClosed()
  }
}
