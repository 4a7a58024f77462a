import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PGlite } from '@electric-sql/pglite'

/**
 * A freshly initialised, empty PGlite data folder, dumped once and shared by
 * every new store the tests open: PGlite's initdb costs about 7 s of CPU per
 * store, and a run opens a few hundred stores. The dump holds no migration,
 * so the service's own start-up still makes its tables. It differs from what
 * `PGlite.create()` makes in two settings that change no query's answer, only
 * what every start costs (measured 2026-11-26, docs/testing.md):
 *
 * - WAL segments of 1 MB instead of 16 (`initdb --wal-segsize=1`): initdb
 *   leaves a whole zero-filled segment, 16 of the dump's 40 MB, which every
 *   store then copies into its file system;
 * - 16 MB of shared buffers instead of 128 (`ALTER SYSTEM`, kept in the
 *   folder's postgresql.auto.conf): PostgreSQL clears them at every start.
 *
 * Together a store starts in about half the time (0.65 s instead of 1.3 s).
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
const cacheFile = join(repositoryRoot, 'node_modules/.cache/admin-permission-service', `pglite-${version}-empty-wal1mb-buffers${SHARED_BUFFERS}.tar`)

let file: Promise<string> | undefined

async function findOrMake(): Promise<string> {
  if (existsSync(cacheFile)) return cacheFile
  // Not made yet in this checkout: make it, then publish it whole with a rename (files running at once may race here).
  const pglite = await PGlite.create({ initDbStartParams: INITDB_PARAMS })
  await pglite.exec(`ALTER SYSTEM SET shared_buffers = '${SHARED_BUFFERS}'`)
  const made = await pglite.dumpDataDir('none')
  await pglite.close()
  mkdirSync(join(cacheFile, '..'), { recursive: true })
  const partial = `${cacheFile}.${process.pid}`
  writeFileSync(partial, Buffer.from(await made.arrayBuffer()))
  renameSync(partial, cacheFile)
  return cacheFile
}

/** The file holding the empty data folder: what `APS_TEST_PGLITE_INITDB` names for the stores the service opens (docs/testing.md). */
export function emptyPGliteDataDirFile(): Promise<string> {
  file ??= findOrMake()
  return file
}
