import { ConfigError, loadConfig, type Config } from '../config.js'
import { isServiceError } from '../domain/errors.js'
import { ModelError } from '../engine/model.js'
import { createLocalizer } from '../http/i18n/index.js'
import type { Database } from '../storage/db.js'
import {
  USAGE,
  UsageError,
  auditVerifyCommand,
  bootstrapCommand,
  migrateCommand,
  modelCheckCommand,
  onboardCommand,
  tokenCommand,
  type CliIo,
} from './commands.js'

export interface RunOptions {
  env?: Record<string, string | undefined>
  io?: CliIo
  db?: Database
}

const processIo: CliIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}

/** Runs one command line; returns the exit code (0 done, 1 failed, 2 usage). Never throws. */
export async function runCli(argv: string[], options: RunOptions = {}): Promise<number> {
  const io = options.io ?? processIo
  const [command, ...rest] = argv
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    io.out(USAGE)
    return command === undefined ? 2 : 0
  }
  let config: Config
  try {
    config = loadConfig(options.env ?? process.env)
  } catch (error) {
    io.err(error instanceof ConfigError ? error.message : String(error))
    return 1
  }
  const ctx = { config, io, ...(options.db !== undefined ? { db: options.db } : {}) }
  try {
    if (command === 'bootstrap') return await bootstrapCommand(ctx, rest)
    if (command === 'onboard-merchant') return await onboardCommand(ctx, rest)
    if (command === 'token') return await tokenCommand(ctx, rest)
    if (command === 'migrate') return await migrateCommand(ctx, rest)
    if (command === 'model' && rest[0] === 'check') return await modelCheckCommand(ctx, rest.slice(1))
    if (command === 'audit' && rest[0] === 'verify') return await auditVerifyCommand(ctx, rest.slice(1))
    throw new UsageError(`unknown command: ${[command, ...rest.slice(0, 1)].join(' ')}`)
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`${error.message}\n\n${USAGE}`)
      return 2
    }
    if (isServiceError(error)) {
      io.err(createLocalizer('en').translator('en')(`errors.${error.code}`, { ...error.params }))
      return 1
    }
    if (error instanceof ModelError || error instanceof ConfigError) {
      io.err(error.message)
      return 1
    }
    io.err(`failed: ${error instanceof Error ? error.message : String(error)}`)
    return 1
  }
}
