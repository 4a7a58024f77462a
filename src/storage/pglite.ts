import { mkdirSync } from 'node:fs'
import { PGlite } from '@electric-sql/pglite'
import type { Database, QueryResult, Queryable, Row } from './db.js'

interface PGliteQueryable {
  query<R>(text: string, params?: unknown[]): Promise<{ rows: R[]; affectedRows?: number }>
  exec(script: string): Promise<unknown>
}

function adapt(target: PGliteQueryable): Queryable {
  return {
    async query<R = Row>(text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      const result = await target.query<R>(text, params as unknown[])
      return { rows: result.rows, rowCount: result.affectedRows || result.rows.length }
    },
    async exec(script: string): Promise<void> {
      await target.exec(script)
    },
  }
}

/** PGlite has a single connection: it serialises queries, and transactions go through `transaction()`. */
class PGliteDatabase implements Database {
  readonly kind = 'pglite' as const
  private readonly plain: Queryable
  constructor(private readonly pglite: PGlite) {
    this.plain = adapt(pglite)
  }

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    return this.plain.query<R>(text, params)
  }

  exec(script: string): Promise<void> {
    return this.plain.exec(script)
  }

  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pglite.transaction((tx) => work(adapt(tx)))
  }

  async close(): Promise<void> {
    if (!this.pglite.closed) await this.pglite.close()
  }
}

/** `dataDir` null keeps everything in memory. */
export async function openPGlite(dataDir: string | null): Promise<Database> {
  if (dataDir !== null) mkdirSync(dataDir, { recursive: true })
  const pglite = dataDir === null ? await PGlite.create() : await PGlite.create({ dataDir })
  return new PGliteDatabase(pglite)
}
