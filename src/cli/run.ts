import { ConfigError, loadDatabaseConfig, type Config, type DatabaseConfig } from '../config.js'
import { loadConfig } from '../startup.js'
import { isServiceError, type ServiceError } from '../domain/errors.js'
import { StorageUnavailableError } from '../storage/db.js'
import { ModelError } from '../engine/model.js'
import { createLocalizer } from '../i18n/index.js'
import type { Database } from '../storage/db.js'
import {
  CliFailure,
  USAGE,
  auditVerifyCommand,
  bootstrapCommand,
  migrateCommand,
  modelCheckCommand,
  onboardCommand,
  tokenCommand,
  type CliContext,
  type CliIo,
} from './commands.js'
import { UsageError } from './inputs.js'
import { passwordResetCommand } from './passwordCommand.js'
import { policyExportCommand, policyImportCommand } from './policyCommand.js'

export interface RunOptions {
  /** The environment to configure from, as the server reads it (default process.env). */
  env?: Record<string, string | undefined>
  io?: CliIo
  /** Use this database instead of opening the configured one (tests); it is left open. */
  db?: Database
}

const processIo: CliIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}

type Runner<C extends DatabaseConfig> = (ctx: CliContext<C>, args: string[]) => Promise<number>

/**
 * A command and the configuration it reads: a command that only opens the
 * database does not ask for a token key (with PostgreSQL, loadConfig wants one).
 */
type Command = { config: 'database'; run: Runner<DatabaseConfig> } | { config: 'full'; run: Runner<Config> }
const databaseOnly = (run: Runner<DatabaseConfig>): Command => ({ config: 'database', run })
const full = (run: Runner<Config>): Command => ({ config: 'full', run })

/** Command words to their runner; `model check` and `audit verify` take two words. */
const COMMANDS: Record<string, Command> = {
  bootstrap: full(bootstrapCommand),
  'onboard-merchant': full(onboardCommand),
  token: full(tokenCommand),
  migrate: databaseOnly(migrateCommand),
  'model check': databaseOnly(modelCheckCommand),
  'audit verify': databaseOnly(auditVerifyCommand),
  'password reset': full(passwordResetCommand),
  'policy export': full(policyExportCommand),
  'policy import': full(policyImportCommand),
}

function resolve(argv: string[]): { command: Command; args: string[] } | null {
  const [first = '', second = ''] = argv
  const two = COMMANDS[`${first} ${second}`]
  if (two !== undefined) return { command: two, args: argv.slice(2) }
  const one = COMMANDS[first]
  return one !== undefined && !first.includes(' ') ? { command: one, args: argv.slice(1) } : null
}

/** A service error in plain English, with the fields named as the options that carry them. */
function describeServiceError(error: ServiceError): string {
  const t = createLocalizer('en').translator('en')
  const fields = (error.fieldErrors ?? []).map((f) => `--${f.field.replace(/_/g, '-')} ${t(`validation.${f.message}`, { defaultValue: f.message })}`)
  return fields.length > 0 ? fields.join('; ') : t(`errors.${error.code}`, { ...error.params })
}

/** Runs one command line and returns its exit code: 0 done, 1 failed, 2 usage error. Never throws. */
export async function runCli(argv: string[], options: RunOptions = {}): Promise<number> {
  const io = options.io ?? processIo
  if (argv.length === 1 && ['--help', '-h', 'help'].includes(argv[0] as string)) {
    io.out(USAGE)
    return 0
  }
  const resolved = resolve(argv)
  if (resolved === null) {
    io.err(argv.length === 0 ? USAGE : `unknown command: ${argv.slice(0, 2).join(' ')}\n\n${USAGE}`)
    return 2
  }
  const { command, args } = resolved
  if (args.includes('--help') || args.includes('-h')) {
    io.out(USAGE)
    return 0
  }
  try {
    const env = options.env ?? process.env
    const base = { io, ...(options.db !== undefined ? { db: options.db } : {}) }
    if (command.config === 'database') return await command.run({ ...base, config: loadDatabaseConfig(env) }, args)
    return await command.run({ ...base, config: loadConfig(env) }, args)
  } catch (error) {
    return report(error, io)
  }
}

function report(error: unknown, io: CliIo): number {
  if (error instanceof UsageError) {
    io.err(`${error.message}\n\n${USAGE}`)
    return 2
  }
  if (error instanceof StorageUnavailableError) {
    io.err(`failed: the database is unavailable: ${messageOf(error.cause)}`)
    return 1
  }
  if (isServiceError(error)) {
    io.err(describeServiceError(error))
    return error.code === 'VALIDATION_FAILED' ? 2 : 1
  }
  if (error instanceof CliFailure || error instanceof ModelError || error instanceof ConfigError) {
    io.err(error.message)
    return 1
  }
  // Anything else (the database unreachable, the store in use, a failed migration): its message, never its stack.
  io.err(`failed: ${messageOf(error)}`)
  return 1
}

/** The first line of an error's message; a connection refused on every address is an AggregateError with none. */
function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.message === '') return messageOf(error.errors[0])
  const message = error instanceof Error ? error.message || error.name : String(error)
  return message.split('\n')[0] ?? message
}
