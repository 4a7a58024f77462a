import pg from 'pg'
import type { Database, QueryResult, Queryable, Row } from './db.js'

export interface PostgresOptions {
  url: string
  /** Every connection uses this schema (tests give each file its own). */
  schema?: string
  max?: number
  onIdleError?: (error: Error) => void
}

class PostgresDatabase implements Database {
  readonly kind = 'postgres' as const
  constructor(private readonly pool: pg.Pool) {}

  async query<R = Row>(text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    const result = await this.pool.query(text, params as unknown[])
    return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 }
  }

  async exec(script: string): Promise<void> {
    await this.pool.query(script)
  }

  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect()
    const tx: Queryable = {
      async query<R = Row>(text: string, params: readonly unknown[] = []) {
        const result = await client.query(text, params as unknown[])
        return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 }
      },
      async exec(script: string) {
        await client.query(script)
      },
    }
    let broken = false
    try {
      await client.query('BEGIN')
      const value = await work(tx)
      await client.query('COMMIT')
      return value
    } catch (error) {
      try {
        await client.query('ROLLBACK')
      } catch {
        broken = true
      }
      throw error
    } finally {
      client.release(broken)
    }
  }

  private closing: Promise<void> | null = null

  /** Idempotent: shutdown paths may close twice. */
  close(): Promise<void> {
    this.closing ??= this.pool.end()
    return this.closing
  }
}

export function openPostgres(options: PostgresOptions): Database {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max ?? 10,
    ...(options.schema !== undefined ? { options: `-c search_path=${options.schema}` } : {}),
  })
  // An idle connection dropped by the server must not crash the process; the
  // pool replaces it on the next checkout.
  pool.on('error', (error) => options.onIdleError?.(error))
  return new PostgresDatabase(pool)
}
