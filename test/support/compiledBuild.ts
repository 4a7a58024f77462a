import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'
import { repositoryRoot } from './serverProcess.js'

const run = promisify(execFile)

/** What `npm run build` reads: the sources and the settings it compiles them with. */
function buildInputs(): string[] {
  const files: string[] = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else files.push(path)
    }
  }
  walk(join(repositoryRoot, 'src'))
  files.push(...['package.json', 'tsconfig.json', 'tsconfig.build.json'].map((name) => join(repositoryRoot, name)))
  return files.sort()
}

function sourceDigest(): string {
  const digest = createHash('sha256')
  for (const file of buildInputs()) digest.update(`${relative(repositoryRoot, file)}\0`).update(readFileSync(file)).update('\0')
  return digest.digest('hex').slice(0, 16)
}

const LOCK_WAIT_MS = 150_000

let built: Promise<string> | undefined

async function findOrBuild(): Promise<string> {
  const cache = join(repositoryRoot, 'node_modules/.cache/admin-permission-service')
  const target = join(cache, `dist-${sourceDigest()}`)
  if (existsSync(target)) return target
  mkdirSync(cache, { recursive: true })
  // The gateway and image tests run at the same time: one builds while the others wait for its folder.
  const lock = `${target}.lock`
  const deadline = Date.now() + LOCK_WAIT_MS
  for (;;) {
    try {
      mkdirSync(lock)
      break
    } catch {
      if (existsSync(target)) return target
      // A builder that died leaves its lock: after the wait, build anyway.
      if (Date.now() > deadline) break
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  try {
    if (existsSync(target)) return target
    const partial = `${target}.${process.pid}`
    rmSync(partial, { recursive: true, force: true })
    await run('npm', ['run', 'build', '--', '--outDir', partial], { cwd: repositoryRoot, timeout: 120_000 })
    renameSync(partial, target)
    return target
  } finally {
    rmSync(lock, { recursive: true, force: true })
  }
}

/**
 * `npm run build`'s dist/ for the sources as they are, copied to `outDir`.
 * The compiler runs once per source tree, not once per test that needs the
 * compiled service (the Dockerfile's and the gateways'): its output is kept
 * under node_modules/.cache, named by the digest of src/, package.json and
 * the tsconfig files, so any edit builds anew. A build that fails rejects.
 */
export async function compiledDist(outDir: string): Promise<void> {
  built ??= findOrBuild()
  cpSync(await built, outDir, { recursive: true })
}
