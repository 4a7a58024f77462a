import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PGlite } from '@electric-sql/pglite'

/**
 * A freshly initialised, empty PGlite data folder, dumped once and shared by
 * every in-memory test database: PGlite's initdb costs about 7 s of CPU per
 * store, loading the dump about 2 s, and a run opens a few hundred stores.
 * The dump is what initdb made and nothing else (no migration), so a store
 * started from it is the one `PGlite.create()` would give. It is kept under
 * node_modules/.cache, named by PGlite's version: a new PGlite (or `npm ci`)
 * makes a new one. The same file starts the stores of the service itself,
 * in this process and in the server and command-line processes the tests
 * start: `test/helper.ts` names it in APS_TEST_PGLITE_INITDB, which
 * `openPGlite` reads (a hook for tests alone).
 */

const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url))
const version = (JSON.parse(readFileSync(join(repositoryRoot, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string }).version
const cacheFile = join(repositoryRoot, 'node_modules/.cache/admin-permission-service', `pglite-${version}-empty.tar`)

let file: Promise<string> | undefined
let dump: Promise<Blob> | undefined

async function findOrMake(): Promise<string> {
  if (existsSync(cacheFile)) return cacheFile
  // Not made yet in this checkout: make it, then publish it whole with a rename (files running at once may race here).
  const pglite = await PGlite.create()
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

/** The empty data folder to start an in-memory PGlite from. */
export function emptyPGliteDataDir(): Promise<Blob> {
  dump ??= emptyPGliteDataDirFile().then((path) => new Blob([readFileSync(path)]))
  return dump
}
