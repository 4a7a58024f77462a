import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { repositoryRoot } from './serverProcess.js'

const run = promisify(execFile)

/** A documentation file's text, by its path from the repository's root (`README.md`, `docs/operations.md`). */
export const documentText = (path: string): string => readFileSync(join(repositoryRoot, path), 'utf8')

/** The paths of the README and every page under docs/: what a reader may copy a command from. */
export const documentPaths = (): string[] => [
  'README.md',
  ...readdirSync(join(repositoryRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
]

/** The first ```sh block after a heading of the document at `path`. */
export function shellBlock(heading: string, path: string): string {
  const text = documentText(path)
  const at = text.indexOf(`\n${heading}\n`)
  if (at < 0) throw new Error(`${path} has no heading ${heading}`)
  const open = text.indexOf('```sh\n', at)
  const close = text.indexOf('\n```\n', open)
  return text.slice(open + '```sh\n'.length, close + 1)
}

export interface Ran {
  code: number
  stdout: string
  stderr: string
}

/** Runs a script as `bash -euo pipefail`, without the machine's start-up files. */
export const bash = (script: string, options: { cwd: string; env: Record<string, string | undefined>; timeout: number }): Promise<Ran> =>
  run('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', script], { ...options, maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  )
