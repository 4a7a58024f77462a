import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PGlite, type Transaction } from '@electric-sql/pglite'
import type { Database, QueryResult, Queryable, Row, TransactionOptions } from '../../src/storage/db.js'
import { migrate, readMigrations } from '../../src/storage/migrate.js'

/**
 * A freshly initialised, empty PGlite data folder, dumped once and shared by
 * every new store the tests open: PGlite's initdb costs about 7 s of CPU per
 * store, and a run opens a few hundred stores. The dump holds no migration
 * (the migrated one is further down). It differs from what
 * `PGlite.create()` makes in three ways that change no answer the service
 * gives, only what every start costs (docs/testing.md):
 *
 * - WAL segments of 1 MB instead of 16 (`initdb --wal-segsize=1`): initdb
 *   leaves a whole zero-filled segment, 16 of the dump's 40 MB, which every
 *   store then copies into its file system;
 * - 16 MB of shared buffers instead of 128 (`ALTER SYSTEM`, kept in the
 *   folder's postgresql.auto.conf): PostgreSQL clears them at every start;
 * - no `template0` and `template1` databases: they are only copied from by
 *   CREATE DATABASE, which neither the service nor the tests run, and they
 *   were half of the dump (15 of 31 MB) that every store unpacks.
 *
 * Together a store starts in well under half the time initdb's own dump
 * takes.
 * The dump is kept under node_modules/.cache, named by PGlite's version and
 * these settings: a new PGlite (or `npm ci`) makes a new one. The same file
 * starts the stores of the service itself, in this process and in the server
 * and command-line processes the tests start: `test/helper.ts` names it in
 * APS_TEST_PGLITE_INITDB, which `openPGlite` reads (a hook for tests alone).
 */

const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url))
const version = (JSON.parse(readFileSync(join(repositoryRoot, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string }).version
const INITDB_PARAMS = ['--wal-segsize=1']
const SHARED_BUFFERS = '16MB'
const cacheFile = join(repositoryRoot, 'node_modules/.cache/admin-permission-service', `pglite-${version}-empty-wal1mb-buffers${SHARED_BUFFERS}-notemplates.tar`)

/** Writes a dump to `target` whole: made elsewhere, then renamed, since files running at once may race here. */
async function publish(target: string, made: Blob): Promise<string> {
  mkdirSync(join(target, '..'), { recursive: true })
  const partial = `${target}.${process.pid}`
  writeFileSync(partial, Buffer.from(await made.arrayBuffer()))
  renameSync(partial, target)
  return target
}

let file: Promise<string> | undefined

async function findOrMake(): Promise<string> {
  if (existsSync(cacheFile)) return cacheFile
  const pglite = await PGlite.create({ initDbStartParams: INITDB_PARAMS })
  await pglite.exec(`ALTER SYSTEM SET shared_buffers = '${SHARED_BUFFERS}'`)
  // A template database cannot be dropped until it is no longer one; DROP DATABASE runs alone, outside a transaction.
  for (const name of ['template0', 'template1']) {
    await pglite.exec(`ALTER DATABASE ${name} IS_TEMPLATE false`)
    await pglite.exec(`DROP DATABASE ${name}`)
  }
  await pglite.exec('CHECKPOINT')
  const made = await pglite.dumpDataDir('none')
  await pglite.close()
  return publish(cacheFile, made)
}

/** The file holding the empty data folder: what `APS_TEST_PGLITE_INITDB` names for the stores the service opens (docs/testing.md). */
export function emptyPGliteDataDirFile(): Promise<string> {
  file ??= findOrMake()
  return file
}

/** PGlite as `migrate` takes it: only to make the migrated dump below. */
function asDatabase(pglite: PGlite): Database {
  const on = (target: PGlite | Transaction): Queryable => ({
    async query<R>(text: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
      const result = await target.query<R>(text, [...params])
      return { rows: result.rows, rowCount: result.affectedRows || result.rows.length }
    },
    async queryArrays(text: string, params: readonly unknown[] = []): Promise<unknown[][]> {
      return (await target.query<unknown[]>(text, [...params], { rowMode: 'array' })).rows
    },
    async exec(script: string): Promise<void> {
      await target.exec(script)
    },
  })
  const inTransaction = <T>(work: (tx: Queryable, opened: Row[]) => Promise<T>, options: TransactionOptions = {}): Promise<T> =>
    pglite.transaction(async (tx) => work(on(tx), options.opening === undefined ? [] : (await on(tx).query(options.opening)).rows))
  return { kind: 'pglite', ...on(pglite), transaction: inTransaction, snapshot: inTransaction, close: () => pglite.close() }
}

let migratedFile: Promise<string> | undefined

/**
 * The empty data folder above with sql/'s migrations applied, by the
 * service's own `migrate`: a store the service opens from it finds every
 * migration recorded and applies none, which saves each test's service
 * about 0.15 s of CPU (docs/testing.md). Named by the migrations' content,
 * so an edited or added migration makes a new dump, and by the day (UTC),
 * since a migration makes the decision log's partitions of the day it runs.
 * Only `test/helper.ts`'s services start from it: files testing the
 * migrations themselves, and the server and command-line processes, start
 * from the empty one.
 */
async function findOrMakeMigrated(): Promise<string> {
  const migrations = readMigrations()
  const digest = createHash('sha256')
  for (const m of migrations) digest.update(`${m.version}\0${m.sql}\0`)
  const day = new Date().toISOString().slice(0, 10)
  const target = cacheFile.replace(/\.tar$/, `-migrated-${digest.digest('hex').slice(0, 12)}-${day}.tar`)
  if (existsSync(target)) return target
  const pglite = await PGlite.create({ loadDataDir: new Blob([readFileSync(await emptyPGliteDataDirFile())]) })
  await migrate(asDatabase(pglite), migrations)
  await pglite.exec('CHECKPOINT')
  const made = await pglite.dumpDataDir('none')
  await pglite.close()
  return publish(target, made)
}

/** The file holding the migrated data folder (findOrMakeMigrated). */
export function migratedPGliteDataDirFile(): Promise<string> {
  migratedFile ??= findOrMakeMigrated()
  return migratedFile
}
