import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
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
 * makes a new one.
 */

const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url))
const version = (JSON.parse(readFileSync(join(repositoryRoot, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string }).version
const cacheFile = join(repositoryRoot, 'node_modules/.cache/admin-permission-service', `pglite-${version}-empty.tar`)

let dump: Promise<Blob> | undefined

async function readOrMake(): Promise<Blob> {
  try {
    return new Blob([readFileSync(cacheFile)])
  } catch {
    // Not made yet (or made by nobody in this checkout): make it, then publish it whole with a rename.
  }
  const pglite = await PGlite.create()
  const made = await pglite.dumpDataDir('none')
  await pglite.close()
  mkdirSync(join(cacheFile, '..'), { recursive: true })
  const partial = `${cacheFile}.${process.pid}`
  writeFileSync(partial, Buffer.from(await made.arrayBuffer()))
  renameSync(partial, cacheFile)
  return made
}

/** The empty data folder to start an in-memory PGlite from. */
export function emptyPGliteDataDir(): Promise<Blob> {
  dump ??= readOrMake()
  return dump
}
