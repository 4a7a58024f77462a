import { readFileSync, readdirSync } from 'node:fs'
import { join, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import t from 'tap'
import { byCodeUnits } from '../../src/domain/textOrder.js'

/**
 * The suite's test files, run a share at a time in one process each.
 *
 * Each test file can run alone (`npx tap test/x.test.ts`), in a process of its
 * own. `npm test` and CI instead run the files in SUITE_PARTS processes
 * (test/suites/), each importing its share of the files one after another:
 * most of a lone file's CPU is fixed (Node, tsx, tap and the service's modules
 * loaded, PGlite's WebAssembly compiled), and a part pays it once for all its
 * files (docs/testing.md). A file's tests are its module's top-level
 * `t.test` calls on tap's root test, so importing several modules into one
 * process queues their tests one file after another, each file's teardowns
 * run before the next file's first test.
 */
export const SUITE_PARTS = 14

const testRoot = fileURLToPath(new URL('..', import.meta.url))

/** Every test file but the parts themselves, as paths under test/ with `/`, sorted by code unit. */
export function suiteFiles(): string[] {
  return readdirSync(testRoot, { recursive: true, encoding: 'utf8' })
    .map((path) => path.split(sep).join('/'))
    .filter((path) => path.endsWith('.test.ts') && !path.startsWith('suites/'))
    .sort(byCodeUnits)
}

/**
 * The files one part runs: every SUITE_PARTS-th file of the sorted list, so each
 * folder's files (and its slow ones) spread over the parts. On PostgreSQL the
 * files that run once, on PGlite (they call `onceOnPGlite(`), are left out:
 * they would only end their process there.
 */
export function partFiles(part: number, onPostgres: boolean): string[] {
  return suiteFiles()
    .filter((_, index) => index % SUITE_PARTS === part)
    .filter((path) => !onPostgres || !readFileSync(join(testRoot, path), 'utf8').includes('onceOnPGlite('))
}

/** A lone file gets tap's 180 s; a part gets as much for each file it runs. */
const SECONDS_PER_FILE = 180

export async function runPart(part: number): Promise<void> {
  const files = partFiles(part, process.env.DATABASE_URL?.startsWith('postgres') === true)
  if (files.length === 0) {
    t.plan(0, 'no file of this part runs on this back end')
    return
  }
  for (const path of files) await import(pathToFileURL(join(testRoot, path)).href)
  // After the imports, so a file's own t.setTimeout (meant for it alone) does not cut the part short.
  t.setTimeout(files.length * SECONDS_PER_FILE * 1000)
}
