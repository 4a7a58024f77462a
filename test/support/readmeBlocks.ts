import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { repositoryRoot } from './serverProcess.js'

const run = promisify(execFile)
export const readme = readFileSync(join(repositoryRoot, 'README.md'), 'utf8')

/** The first ```sh block after a heading. */
export function shellBlock(heading: string): string {
  const at = readme.indexOf(`\n${heading}\n`)
  if (at < 0) throw new Error(`README has no heading ${heading}`)
  const open = readme.indexOf('```sh\n', at)
  const close = readme.indexOf('\n```\n', open)
  return readme.slice(open + '```sh\n'.length, close + 1)
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

