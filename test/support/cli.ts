import { runCli, type RunOptions } from '../../src/cli/run.js'
import type { Database } from '../../src/storage/db.js'
import { TEST_SECRET, postgresUrl } from '../helper.js'

/** What one command printed (lines joined with newlines) and its exit code. */
export interface CliOutcome {
  code: number
  out: string
  err: string
}

export type Cli = (...argv: string[]) => Promise<CliOutcome>

/**
 * The command line run in this process (`runCli`, what `src/cli/main.ts`
 * runs), bound to one environment and, when given, one open database that it
 * uses instead of opening the configured one; it captures what it prints.
 */
export function cliFor(env: Record<string, string | undefined>, db?: Database): Cli {
  return async (...argv) => {
    const out: string[] = []
    const err: string[] = []
    const options: RunOptions = { env, io: { out: (l) => void out.push(l), err: (l) => void err.push(l) } }
    if (db !== undefined) options.db = db
    const code = await runCli(argv, options)
    return { code, out: out.join('\n'), err: err.join('\n') }
  }
}

/** The command line on a test's own database, configured as the suite's back end is (PostgreSQL or PGlite). */
export function cliOn(db: Database): Cli {
  return cliFor({ DATABASE_URL: postgresUrl ?? 'pglite://memory', JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' }, db)
}
