import { readFileSync, statSync } from 'node:fs'
import {
  MAX_POLICY_FILE_BYTES,
  PolicyFileError,
  describeDiff,
  exportPolicy,
  importPolicy,
  summarizeDiff,
} from '../commands/policyCsv.js'
import { DOMAIN_PATTERN } from '../domain/identifiers.js'
import type { CliContext } from './commands.js'
import { withService } from './commands.js'
import { UsageError, parseOptions } from './inputs.js'

const domainName = new RegExp(DOMAIN_PATTERN)

function domainOption(value: string | undefined): string | undefined {
  if (value !== undefined && !domainName.test(value)) throw new UsageError('--domain contains characters that are not allowed')
  return value
}

/**
 * `policy export [--domain D]`: the stored policy as Casbin CSV on stdout
 * (nothing else is printed there), for `newEnforcer('model.conf', file)`.
 */
export async function policyExportCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = parseOptions(args, { domain: { type: 'string' } })
  const domain = domainOption(o.domain)
  return withService(ctx, async (service) => {
    const exported = await exportPolicy(service, { domain })
    if (exported.csv !== '') ctx.io.out(exported.csv.slice(0, -1))
    if (exported.leftOut > 0) {
      ctx.io.err(`left out ${exported.leftOut} stored rules that decide nothing (pairs not active in the catalog)`)
    }
    return 0
  })
}

/** The file's text, or why it cannot be used (exit code 2, like any input mistake). */
function readPolicyText(path: string): string | { problem: string } {
  try {
    const size = statSync(path).size
    if (size > MAX_POLICY_FILE_BYTES) return { problem: `${path} is ${size} bytes; a policy file may have at most ${MAX_POLICY_FILE_BYTES}` }
    return readFileSync(path, 'utf8')
  } catch (error) {
    return { problem: `cannot read the policy file ${path}: ${(error as Error).message}` }
  }
}

/**
 * `policy import --file F [--domain D] [--dry-run]`: prints the difference
 * between F and the store, then (without --dry-run) applies it in one
 * transaction. A line that breaks the rules is named with its number, and
 * nothing is changed (exit code 2).
 */
export async function policyImportCommand(ctx: CliContext, args: string[]): Promise<number> {
  // parseOptions takes string options only; --dry-run is the one flag.
  const dryRun = args.includes('--dry-run')
  const o = parseOptions(
    args.filter((a) => a !== '--dry-run'),
    { file: { type: 'string' }, domain: { type: 'string' } },
    ['file'],
  )
  const domain = domainOption(o.domain)
  const path = o.file as string
  const text = readPolicyText(path)
  if (typeof text !== 'string') {
    ctx.io.err(text.problem)
    return 2
  }
  return withService(ctx, async (service) => {
    let outcome
    try {
      outcome = await importPolicy(service, text, { domain, dryRun })
    } catch (error) {
      if (!(error instanceof PolicyFileError)) throw error
      for (const p of error.problems) ctx.io.err(`${path}:${p.line}: ${p.reason}`)
      if (error.total > error.problems.length) ctx.io.err(`… and ${error.total - error.problems.length} more`)
      ctx.io.err(`${path} was refused: ${error.message}; nothing was changed`)
      return 2
    }
    for (const line of describeDiff(outcome.diff)) ctx.io.out(line)
    ctx.io.out(summarizeDiff(outcome.diff))
    if (dryRun) ctx.io.out('dry run: nothing was written')
    else if (outcome.applied) ctx.io.out(`applied in one transaction, revision ${outcome.revision}`)
    return 0
  })
}
