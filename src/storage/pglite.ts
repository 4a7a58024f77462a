import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
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

/** A data folder another PGlite (another process, or this one) has open. */
export class StoreInUseError extends Error {
  override name = 'StoreInUseError'
}

const LOCK_FILE = 'aps.lock'
const heldHere = new Set<string>()

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * PGlite takes no lock on its folder (its postmaster.pid is a fixed fake), and
 * two instances writing one folder corrupt it: the server and a command line
 * run beside it would. A file with the holder's process id stands in for
 * PostgreSQL's lock: a live holder refuses the open, a dead one's file is
 * taken over. Returns the release function.
 */
function lockFolder(dataDir: string): () => void {
  const file = join(dataDir, LOCK_FILE)
  if (heldHere.has(dataDir)) throw new StoreInUseError(`the embedded store ${dataDir} is already open in this process`)
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 })
      return holdLock(dataDir, file)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    const holder = lockHolder(file)
    if (holder !== null && holder !== process.pid && alive(holder)) {
      throw new StoreInUseError(
        `the embedded store ${dataDir} is in use by process ${holder} (a running server?): stop it first, ` +
          `or run this against PostgreSQL; if no such process uses it, delete ${file}`,
      )
    }
    // Left by a process that died (or by an earlier run of this process id, e.g. PID 1 in a container).
    rmSync(file, { force: true })
  }
  throw new StoreInUseError(`the embedded store ${dataDir} could not be locked: other processes keep taking ${file}`)
}

function lockHolder(file: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(file, 'utf8'), 10)
    return Number.isInteger(pid) && pid > 0 ? pid : null
  } catch {
    return null
  }
}

function holdLock(dataDir: string, file: string): () => void {
  heldHere.add(dataDir)
  const release = () => {
    process.removeListener('exit', release)
    if (!heldHere.delete(dataDir)) return
    if (lockHolder(file) === process.pid) rmSync(file, { force: true })
  }
  process.once('exit', release)
  return release
}

/** PGlite has a single connection: it serialises queries, and transactions go through `transaction()`. */
class PGliteDatabase implements Database {
  readonly kind = 'pglite' as const
  private readonly plain: Queryable
  constructor(
    private readonly pglite: PGlite,
    private readonly release: () => void,
  ) {
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

  /** One connection: nothing else runs meanwhile, so any transaction is a consistent snapshot. */
  snapshot<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pglite.transaction((tx) => work(adapt(tx)))
  }

  async close(): Promise<void> {
    try {
      if (!this.pglite.closed) await this.pglite.close()
    } finally {
      this.release()
    }
  }
}

/** `dataDir` null keeps everything in memory; a folder is locked against a second opener until closed. */
export async function openPGlite(dataDir: string | null): Promise<Database> {
  if (dataDir === null) return new PGliteDatabase(await PGlite.create(), () => undefined)
  const folder = resolve(dataDir)
  mkdirSync(folder, { recursive: true })
  const release = lockFolder(folder)
  try {
    return new PGliteDatabase(await PGlite.create({ dataDir: folder }), release)
  } catch (error) {
    release()
    throw error
  }
}
