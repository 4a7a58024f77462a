import * as fs from 'node:fs'
import { lstatSync, mkdirSync, readFileSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import lockfile from 'proper-lockfile'
import type { Database, QueryResult, Queryable, Row, TransactionOptions } from './db.js'
import { currentLockOwner, lockOwnerIsGone, parseLockOwner } from './lockOwner.js'

interface PGliteQueryable {
  query<R>(text: string, params?: unknown[], options?: { rowMode?: 'array' | 'object' }): Promise<{ rows: R[]; affectedRows?: number }>
  exec(script: string): Promise<unknown>
}

/** `check` runs before every statement: it stops the process once the folder's lock is no longer this process's. */
function adapt(target: PGliteQueryable, check: () => void): Queryable {
  return {
    async query<R = Row>(text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      check()
      const result = await target.query<R>(text, params as unknown[])
      return { rows: result.rows, rowCount: result.affectedRows || result.rows.length }
    },
    async queryArrays(text: string, params: readonly unknown[] = []): Promise<unknown[][]> {
      check()
      return (await target.query<unknown[]>(text, params as unknown[], { rowMode: 'array' })).rows
    },
    async exec(script: string): Promise<void> {
      check()
      await target.exec(script)
    },
  }
}

/** A data folder another PGlite (another process, or this one) has open. */
export class StoreInUseError extends Error {
  override name = 'StoreInUseError'
}

/**
 * How the folder lock is kept. The holder refreshes the lock's mtime every
 * `updateMs`; an opener takes over a lock not refreshed for `staleMs`. Every
 * process opening one folder must use the same values.
 */
export interface LockTiming {
  staleMs: number
  updateMs: number
}

/**
 * 30 s stale, 2 s refresh. A live holder loses its lock only if it cannot
 * refresh it for about 28 s: its event loop blocked (PGlite runs queries
 * synchronously in WebAssembly, so a long query or a migration blocks it), or
 * its file-system calls queued in libuv's thread pool behind argon2 hashes,
 * or the process paused. None of those should come near 28 s, and a lock
 * lost to an opener that then writes risks the store. The cost is on the other side:
 * a lock left by a process that was killed in another container (or on
 * another machine sharing the folder) is taken over 30 s after its last
 * refresh, and openers are refused until then (the message says how long).
 * On the same machine and in the same PID namespace a dead holder is seen at
 * once and its lock taken without waiting (takeOverFromGoneOwner).
 */
export const STORE_LOCK_TIMING: LockTiming = { staleMs: 30_000, updateMs: 2_000 }

/** The exit code of a process that found its lock on the store taken over (EX_TEMPFAIL: starting again may succeed). */
export const LOCK_LOST_EXIT_CODE = 75

const LOCK_NAME = 'aps.lock'
/** Beside the lock (the lock directory must stay empty to be removable): a random id of the current holder. */
const OWNER_NAME = 'aps.lock.owner'
const heldHere = new Set<string>()

interface FolderLock {
  /** Stops the process unless this process still holds the lock; synchronous, so nothing is written after a loss. */
  check(): void
  release(): Promise<void>
}

/**
 * The lock cannot go away unnoticed: continuing to write beside another
 * opener would corrupt the store, including writes already acknowledged.
 * The process stops at once, without closing PGlite (closing writes a
 * checkpoint), and without removing the lock, which is no longer its own.
 */
function lockLost(folder: string, reason: string): never {
  writeSync(
    2,
    `FATAL: the lock on the embedded store ${folder} was lost (${reason}); another process may have taken it over. ` +
      `Stopping now without writing anything more (exit code ${LOCK_LOST_EXIT_CODE}).\n`,
  )
  process.exit(LOCK_LOST_EXIT_CODE)
}

/**
 * PGlite takes no lock on its folder (its postmaster.pid is a fixed fake), and
 * two instances writing one folder corrupt it: the server and a command line
 * run beside it would. Process ids cannot tell who holds it: two containers
 * on one volume both run as PID 1. So the lock is a directory made with
 * mkdir (atomic, also on network file systems) whose mtime the holder
 * refreshes (proper-lockfile): a lock not refreshed for `staleMs` was left by
 * a process that stopped and is taken over. Beside it the holder writes who it
 * is (lockOwner.ts), so that a holder that provably stopped is not waited for.
 */
async function lockFolder(folder: string, timing: LockTiming): Promise<FolderLock> {
  if (heldHere.has(folder)) throw new StoreInUseError(`the embedded store ${folder} is already open in this process`)
  const lockPath = join(folder, LOCK_NAME)
  const ownerPath = join(folder, OWNER_NAME)
  refuseOldLockFile(folder, lockPath)
  let lost = false
  // proper-lockfile removes the locks it holds when the process exits; once ours is lost that directory is another's.
  const guardedFs = {
    ...fs,
    rmdirSync: (path: string) => {
      if (!lost) fs.rmdirSync(path)
    },
  }
  const onLost = (reason: string): never => {
    lost = true
    return lockLost(folder, reason)
  }
  heldHere.add(folder)
  const owner = JSON.stringify(currentLockOwner())
  const claim = async (): Promise<() => Promise<void>> => {
    const release = await lockfile.lock(folder, {
      lockfilePath: lockPath,
      realpath: false,
      retries: 0,
      stale: timing.staleMs,
      update: timing.updateMs,
      fs: guardedFs,
      onCompromised: (error) => onLost(error.message),
    })
    try {
      writeFileSync(ownerPath, owner, { mode: 0o600 })
    } catch (error) {
      await release()
      throw error
    }
    return release
  }
  let release: () => Promise<void>
  try {
    try {
      release = await claim()
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOCKED') throw error
      const taken = await takeOverFromGoneOwner(lockPath, ownerPath, claim)
      if (taken === null) throw new StoreInUseError(inUseMessage(folder, lockPath, timing))
      release = taken
    }
  } catch (error) {
    heldHere.delete(folder)
    if ((error as NodeJS.ErrnoException).code === 'ELOCKED') throw new StoreInUseError(inUseMessage(folder, lockPath, timing))
    throw error
  }
  // The heartbeat runs on a timer: after the process was paused or blocked, a query could run before the timer
  // notices a takeover. Reading the owner id before the first query after such a gap closes that window.
  let checkedAt = Date.now()
  return {
    check() {
      const now = Date.now()
      if (now - checkedAt < timing.updateMs) return
      let current: string
      try {
        current = readFileSync(ownerPath, 'utf8')
      } catch (error) {
        current = `unreadable: ${(error as Error).message}`
      }
      if (current !== owner) onLost(`${ownerPath} no longer names this process (${current.slice(0, 80)})`)
      checkedAt = now
    },
    async release() {
      if (!heldHere.delete(folder)) return
      try {
        await release()
      } catch (error) {
        // Already released (or lost, and then the process is stopping): nothing of ours to remove.
        if ((error as NodeJS.ErrnoException).code !== 'ERELEASED') throw error
      }
    },
  }
}

/** Longer than any takeover takes: a takeover mark this old was left by an opener that died in the middle of one. */
const TAKEOVER_STALE_MS = 10_000

/**
 * A lock whose holder has certainly stopped (same machine and PID
 * namespace, and its process gone: see lockOwnerIsGone) is taken at once
 * instead of after `staleMs`, so a supervisor restarting a killed server
 * is not refused for half a minute. Two openers may find the same dead
 * holder: a takeover mark made with mkdir lets one of them through, which
 * reads the owner again, removes the lock and claims it before lifting the
 * mark; the other then finds a live owner, or no mark to make, and is
 * refused. Returns the claim's release, or null when the holder may be alive.
 */
async function takeOverFromGoneOwner(
  lockPath: string,
  ownerPath: string,
  claim: () => Promise<() => Promise<void>>,
): Promise<(() => Promise<void>) | null> {
  const readOwner = (): string | null => {
    try {
      return readFileSync(ownerPath, 'utf8')
    } catch {
      return null
    }
  }
  const seen = readOwner()
  const owner = seen === null ? null : parseLockOwner(seen)
  if (owner === null || !lockOwnerIsGone(owner)) return null
  const mark = `${lockPath}.takeover`
  try {
    if (Date.now() - statSync(mark).mtimeMs > TAKEOVER_STALE_MS) fs.rmdirSync(mark)
  } catch {
    // No mark: the usual case.
  }
  try {
    mkdirSync(mark)
  } catch {
    return null
  }
  try {
    if (readOwner() !== seen) return null
    fs.rmdirSync(lockPath)
    return await claim()
  } finally {
    fs.rmdirSync(mark)
  }
}

function inUseMessage(folder: string, lockPath: string, timing: LockTiming): string {
  let refreshed = ''
  try {
    const age = Math.max(0, Date.now() - statSync(lockPath).mtimeMs)
    refreshed =
      `; its lock ${lockPath} was refreshed ${Math.round(age / 1000)} s ago: if the process that held it has stopped, ` +
      `the lock is taken over in ${Math.max(1, Math.ceil((timing.staleMs - age) / 1000))} s`
  } catch {
    // Released meanwhile: the plain message is enough.
  }
  return (
    `the embedded store ${folder} is in use by another process (a running server?), perhaps in another container: ` +
    `stop it first, or run this against PostgreSQL${refreshed}`
  )
}

/** Earlier versions kept a file with the holder's process id: such a holder does not refresh a lock and may still be running. */
function refuseOldLockFile(folder: string, lockPath: string): void {
  let isFile = false
  try {
    isFile = lstatSync(lockPath).isFile()
  } catch {
    return
  }
  if (isFile) {
    throw new StoreInUseError(
      `the embedded store ${folder} holds ${lockPath}, the lock file of an earlier version of this service: ` +
        `stop any process of that version using the folder, then delete ${lockPath}`,
    )
  }
}

/** PGlite has a single connection: it serialises queries, and transactions go through `transaction()`. */
class PGliteDatabase implements Database {
  readonly kind = 'pglite' as const
  private readonly plain: Queryable
  constructor(
    private readonly pglite: PGlite,
    private readonly lock: FolderLock | null,
  ) {
    this.plain = adapt(pglite, this.check)
  }

  private readonly check = (): void => this.lock?.check()

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    return this.plain.query<R>(text, params)
  }

  queryArrays(text: string, params?: readonly unknown[]): Promise<unknown[][]> {
    return this.plain.queryArrays(text, params)
  }

  exec(script: string): Promise<void> {
    return this.plain.exec(script)
  }

  transaction<T>(work: (tx: Queryable, opened: Row[]) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    this.check()
    return this.pglite.transaction(async (tx) => {
      const adapted = adapt(tx, this.check)
      return work(adapted, options.opening === undefined ? [] : (await adapted.query(options.opening)).rows)
    })
  }

  /** One connection: nothing else runs meanwhile, so any transaction is a consistent snapshot. */
  snapshot<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    this.check()
    return this.pglite.transaction((tx) => work(adapt(tx, this.check)))
  }

  async close(): Promise<void> {
    try {
      if (!this.pglite.closed) {
        // Closing writes a checkpoint: only while the folder is still ours.
        this.check()
        await this.pglite.close()
      }
    } finally {
      await this.lock?.release()
    }
  }
}

/** The dumps APS_TEST_PGLITE_INITDB has named, as read (testInitdbDump), by file. */
const initdbDumps = new Map<string, Blob>()

/**
 * A hook for the tests alone (docs/testing.md): APS_TEST_PGLITE_INITDB names
 * a file holding a data folder dumped by PGlite (`dumpDataDir`): what its
 * initdb makes, or that with the migrations applied. A new store, in memory
 * or in a folder without a database yet, then starts from it instead of
 * running initdb: seconds of CPU cheaper, which the test suite pays in every
 * store, server and command-line process it starts. Unset, nothing changes.
 * The variable is read when `openPGlite` is called, before anything is
 * awaited, so a test may name another file for one call.
 */
function testInitdbDump(): Blob | undefined {
  const file = process.env.APS_TEST_PGLITE_INITDB
  if (file === undefined || file === '') return undefined
  // Read once per process and file: a test process opens many stores, and PGlite only reads the blob.
  let blob = initdbDumps.get(file)
  if (blob === undefined) {
    blob = new Blob([readFileSync(file)])
    initdbDumps.set(file, blob)
  }
  return blob
}

/**
 * `dataDir` null keeps everything in memory; a folder is locked against a
 * second opener until closed. `lock` is for tests, which cannot wait 30 s
 * for a dead holder's lock to go stale.
 */
export async function openPGlite(dataDir: string | null, options: { lock?: LockTiming } = {}): Promise<Database> {
  if (dataDir === null) {
    const loadDataDir = testInitdbDump()
    return new PGliteDatabase(await PGlite.create(loadDataDir !== undefined ? { loadDataDir } : {}), null)
  }
  const folder = resolve(dataDir)
  mkdirSync(folder, { recursive: true })
  const lock = await lockFolder(folder, options.lock ?? STORE_LOCK_TIMING)
  try {
    // Only a folder without a database yet: PGlite refuses to load a dump over one.
    const loadDataDir = lstatSync(join(folder, 'PG_VERSION'), { throwIfNoEntry: false }) === undefined ? testInitdbDump() : undefined
    return new PGliteDatabase(await PGlite.create(loadDataDir !== undefined ? { dataDir: folder, loadDataDir } : { dataDir: folder }), lock)
  } catch (error) {
    await lock.release()
    throw error
  }
}
