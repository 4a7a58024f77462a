import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import pg from 'pg'
import copyStreams from 'pg-copy-streams'
import {
  StorageUnavailableError,
  isStorageUnavailable,
  type Database,
  type PoolStats,
  type QueryResult,
  type Queryable,
  type Row,
  type Subscription,
  type TransactionOptions,
} from './db.js'

export interface PostgresOptions {
  url: string
  /** Every connection uses this schema (tests give each file its own). */
  schema?: string
  max?: number
  onIdleError?: (error: Error) => void
  /** Connecting, and waiting for a free pooled connection, give up after this long. */
  connectTimeoutMs?: number
  /**
   * A statement gives up after this long (server-side, and client-side one
   * second later for a server that went silent), and so does a whole write
   * transaction: it commits within this budget or not at all.
   */
  statementTimeoutMs?: number
}

interface PgTarget {
  query(text: string, params?: unknown[]): Promise<pg.QueryResult>
  query(config: pg.QueryArrayConfig): Promise<pg.QueryArrayResult>
}

/** One statement; a connection-level failure becomes StorageUnavailableError, anything else stays as it is. */
async function send<R>(target: PgTarget, text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
  try {
    const result = await target.query(text, params as unknown[])
    return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 }
  } catch (error) {
    throw isStorageUnavailable(error) ? new StorageUnavailableError(error) : error
  }
}

/** One statement, its rows as arrays; failures as in send(). */
async function sendArrays(target: PgTarget, text: string, params: readonly unknown[] = []): Promise<unknown[][]> {
  try {
    return (await target.query({ text, values: params as unknown[], rowMode: 'array' })).rows
  } catch (error) {
    throw isStorageUnavailable(error) ? new StorageUnavailableError(error) : error
  }
}

/** COPY (select) TO STDOUT on one connection, chunk by chunk; failures as in send(). */
async function* copyTextOn(client: pg.PoolClient, select: string): AsyncGenerator<Buffer> {
  const chunks = client.query(copyStreams.to(`COPY (${select}) TO STDOUT`))[Symbol.asyncIterator]()
  let ended = false
  try {
    for (;;) {
      const next = (await chunks.next()) as IteratorResult<Buffer>
      if (next.done === true) {
        ended = true
        return
      }
      yield next.value
    }
  } catch (error) {
    ended = true
    throw isStorageUnavailable(error) ? new StorageUnavailableError(error) : error
  } finally {
    // Stopped early: the server goes on sending until the end of the COPY, and the connection answers nothing else before.
    while (!ended) ended = (await chunks.next().catch(() => ({ done: true }))).done === true
  }
}

/** COPY target FROM STDIN on one connection, the lines as they come; failures as in send(). */
async function copyFromOn(client: pg.PoolClient, target: string, lines: Iterable<string>): Promise<void> {
  try {
    await pipeline(Readable.from(lines), client.query(copyStreams.from(`COPY ${target} FROM STDIN`)))
  } catch (error) {
    throw isStorageUnavailable(error) ? new StorageUnavailableError(error) : error
  }
}

/** BEGIN, and the opening statement in the same message (the simple protocol runs both): the opening's rows. */
async function begin(client: pg.PoolClient, opening: string | undefined): Promise<Row[]> {
  if (opening === undefined) {
    await send(client, 'BEGIN')
    return []
  }
  try {
    const results = (await client.query(`BEGIN; ${opening}`)) as unknown as pg.QueryResult[]
    return (results[1]?.rows ?? []) as Row[]
  } catch (error) {
    throw isStorageUnavailable(error) ? new StorageUnavailableError(error) : error
  }
}

function queryableOf(client: pg.PoolClient): Queryable {
  return {
    query: <R = Row>(text: string, params?: readonly unknown[]) => send<R>(client, text, params),
    queryArrays: (text: string, params?: readonly unknown[]) => sendArrays(client, text, params),
    copyText: (select: string) => copyTextOn(client, select),
    copyFrom: (target: string, lines: Iterable<string>) => copyFromOn(client, target, lines),
    async exec(script: string) {
      await send(client, script)
    },
  }
}

/** How the service's connections appear in pg_stat_activity (with the schema, when it is not the default). */
const APPLICATION_NAME = 'admin-permission-service'

/** Margin for the server's clock running a little ahead of ours while a COMMIT may still land. */
const COMMIT_CLOCK_MARGIN_MS = 50

class PostgresDatabase implements Database {
  readonly kind = 'postgres' as const
  constructor(
    private readonly pool: pg.Pool,
    private readonly clientConfig: pg.ClientConfig,
    private readonly writeBudgetMs: number | null,
  ) {}

  query<R = Row>(text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    return send<R>(this.pool, text, params)
  }

  queryArrays(text: string, params: readonly unknown[] = []): Promise<unknown[][]> {
    return sendArrays(this.pool, text, params)
  }

  async exec(script: string): Promise<void> {
    await send(this.pool, script)
  }

  async *copyText(select: string): AsyncGenerator<Buffer> {
    const { client, release } = await this.checkout()
    let failed = false
    try {
      yield* copyTextOn(client, select)
    } catch (error) {
      failed = true
      throw error
    } finally {
      release(failed)
    }
  }

  private async checkout(): Promise<{ client: pg.PoolClient; failed: () => boolean; release: (destroy: boolean) => void }> {
    // A checked-out client has no listener of the pool's: without this one, a
    // connection dropped between two statements is an unhandled 'error' event
    // and takes the process down. It is attached inside the pool's callback,
    // synchronously: after an `await` a FATAL arriving with the connection's
    // first bytes could already have been emitted.
    let failure: Error | null = null
    const onError = (error: Error) => {
      failure = error
    }
    const client = await new Promise<pg.PoolClient>((resolve, reject) => {
      this.pool.connect((error, connected) => {
        if (error !== undefined && error !== null) return reject(new StorageUnavailableError(error))
        if (connected === undefined) return reject(new StorageUnavailableError(new Error('the pool gave no connection')))
        connected.on('error', onError)
        resolve(connected)
      })
    })
    return {
      client,
      failed: () => failure !== null,
      release: (destroy) => {
        client.removeListener('error', onError)
        client.release(destroy || failure !== null)
      },
    }
  }

  async transaction<T>(work: (tx: Queryable, opened: Row[]) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const budget = options.budgetMs ?? this.writeBudgetMs
    const deadline = budget === null ? null : Date.now() + budget
    const { client, failed, release } = await this.checkout()
    let destroy = false
    try {
      const opened = await begin(client, options.opening)
      // Counted after the opening too: a lock it waited for only shortens what the server allows, never lengthens it.
      const beganAt = Date.now()
      const value = await work(queryableOf(client), opened)
      if (deadline === null) {
        await send(client, 'COMMIT')
        return value
      }
      // The server may commit only while our deadline has not passed: it
      // counts from its own transaction start, which came before `beganAt`.
      const serverBudget = deadline - beganAt
      if (Date.now() >= deadline || serverBudget <= 0) {
        throw new StorageUnavailableError(new Error('the write did not finish within its time budget'))
      }
      try {
        await send(client, `SELECT commit_deadline_guard(${Math.floor(serverBudget)}); COMMIT`)
      } catch (error) {
        if (error instanceof StorageUnavailableError) {
          destroy = true
          throw new StorageUnavailableError(error.cause, deadline + COMMIT_CLOCK_MARGIN_MS)
        }
        throw error
      }
      return value
    } catch (error) {
      // A connection that failed (or whose statement timed out on our side and may still be running) is thrown
      // away, not asked to ROLLBACK: that would wait behind the stuck statement; the server rolls back on close.
      if (isStorageUnavailable(error)) destroy = true
      if (!destroy && !failed()) {
        try {
          await client.query('ROLLBACK')
        } catch {
          destroy = true
        }
      }
      throw error
    } finally {
      release(destroy)
    }
  }

  async snapshot<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const { client, release } = await this.checkout()
    let destroy = false
    try {
      await send(client, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      const value = await work(queryableOf(client))
      await send(client, 'COMMIT')
      return value
    } catch (error) {
      destroy = true
      throw error
    } finally {
      release(destroy)
    }
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<Subscription> {
    // Named apart from the pool's connections, so an operator (or a test) can tell the listener in pg_stat_activity;
    // the URL's own application_name would win over the setting, so it leaves the URL.
    const client = new pg.Client({
      ...this.clientConfig,
      ...(this.clientConfig.connectionString !== undefined ? { connectionString: withoutApplicationName(this.clientConfig.connectionString) } : {}),
      application_name: `${this.clientConfig.application_name ?? APPLICATION_NAME}:feed`.slice(-63),
    })
    let settle: (error: Error | null) => void = () => undefined
    const ended = new Promise<Error | null>((resolve) => {
      settle = resolve
    })
    client.on('error', (error) => {
      settle(error)
      client.end().catch(() => undefined)
    })
    client.on('end', () => settle(null))
    client.on('notification', (message) => {
      if (message.channel === channel && message.payload !== undefined) onNotify(message.payload)
    })
    try {
      await client.connect()
      await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`)
    } catch (error) {
      client.end().catch(() => undefined)
      throw new StorageUnavailableError(error)
    }
    return {
      ended,
      ping: async () => {
        await send(client, 'SELECT 1')
      },
      close: async () => {
        settle(null)
        await client.end().catch(() => undefined)
      },
    }
  }

  poolStats(): PoolStats {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount }
  }

  private closing: Promise<void> | null = null

  /** Idempotent: shutdown paths may close twice. */
  close(): Promise<void> {
    this.closing ??= this.pool.end()
    return this.closing
  }
}

function withoutApplicationName(url: string): string {
  try {
    const parsed = new URL(url)
    parsed.searchParams.delete('application_name')
    return parsed.toString()
  } catch {
    return url
  }
}

function nameInUrl(url: string): string | null {
  try {
    return new URL(url).searchParams.get('application_name')
  } catch {
    return null
  }
}

export function openPostgres(options: PostgresOptions): Database {
  const statementTimeout = options.statementTimeoutMs
  const clientConfig: pg.ClientConfig = {
    connectionString: options.url,
    keepAlive: true,
    application_name: nameInUrl(options.url) ?? (options.schema !== undefined ? `${APPLICATION_NAME}:${options.schema}` : APPLICATION_NAME),
    ...(options.schema !== undefined ? { options: `-c search_path=${options.schema}` } : {}),
    ...(options.connectTimeoutMs !== undefined ? { connectionTimeoutMillis: options.connectTimeoutMs } : {}),
    ...(statementTimeout !== undefined
      ? {
          statement_timeout: statementTimeout,
          // The server's own timeout cannot fire across a partition: ours does, a little later.
          query_timeout: statementTimeout + 1000,
          idle_in_transaction_session_timeout: statementTimeout * 2,
        }
      : {}),
  }
  const pool = new pg.Pool({ ...clientConfig, max: options.max ?? 10 })
  // An idle connection dropped by the server must not crash the process; the
  // pool replaces it on the next checkout.
  pool.on('error', (error) => options.onIdleError?.(error))
  return new PostgresDatabase(pool, clientConfig, statementTimeout ?? null)
}
