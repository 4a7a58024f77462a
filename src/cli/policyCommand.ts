import { createReadStream } from 'node:fs'
import { exportPolicy } from '../commands/exportPolicy.js'
import { MAX_POLICY_FILE_BYTES, importPolicy } from '../commands/importPolicy.js'
import { describeDiff, describeRule, summarizeDiff } from '../domain/policyDiff.js'
import { PolicyFileError, PolicyFileRefused } from '../domain/policyImport.js'
import { DEFAULT_MAX_REMOVAL_SHARE } from '../domain/policyFile.js'
import { isDomainName } from '../domain/identifiers.js'
import type { CliContext } from './commands.js'
import { withService } from './commands.js'
import { UsageError, parseOptions } from './inputs.js'


function domainOption(value: string | undefined): string | undefined {
  if (value !== undefined && !isDomainName(value)) throw new UsageError('--domain contains characters that are not allowed')
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

/**
 * The file's text, or why it cannot be used (exit code 2, like any input
 * mistake). The cap is counted while reading, so a pipe or /dev/stdin (whose
 * size nobody knows beforehand) is read no further than one byte past it.
 */
export async function readPolicyText(path: string, maxBytes = MAX_POLICY_FILE_BYTES): Promise<string | { problem: string }> {
  const chunks: Buffer[] = []
  let size = 0
  try {
    // Leaving the loop early destroys the stream: nothing more is read.
    for await (const chunk of createReadStream(path, { highWaterMark: 64 * 1024 })) {
      const buffer = chunk as Buffer
      size += buffer.length
      if (size > maxBytes) return { problem: `${path} holds more than ${maxBytes} bytes; a policy file may have at most ${maxBytes}` }
      chunks.push(buffer)
    }
  } catch (error) {
    return { problem: `cannot read the policy file ${path}: ${(error as Error).message}` }
  }
  return Buffer.concat(chunks, size).toString('utf8')
}

const IMPORT_FLAGS = ['--dry-run', '--allow-mass-removal', '--allow-headerless'] as const

function removalShare(value: string | undefined): number {
  if (value === undefined) return DEFAULT_MAX_REMOVAL_SHARE
  if (!/^\d{1,3}(\.\d+)?$/.test(value) || Number(value) > 100) throw new UsageError('--max-removal-percent must be a number from 0 to 100')
  return Number(value) / 100
}

/**
 * `policy import --file F [--domain D] [--dry-run] [--allow-mass-removal]
 * [--max-removal-percent N] [--allow-headerless]`: prints the difference
 * between F and the store, then (without --dry-run) applies it in one
 * transaction. A line that breaks the rules is named with its number, a file
 * whose header names another scope or that would remove too much is refused,
 * and nothing is changed (exit code 2); a dry run exits as the import would.
 */
export async function policyImportCommand(ctx: CliContext, args: string[]): Promise<number> {
  // parseOptions takes string options only; the flags are picked out first.
  const flag = (name: (typeof IMPORT_FLAGS)[number]) => args.includes(name)
  const o = parseOptions(
    args.filter((a) => !(IMPORT_FLAGS as readonly string[]).includes(a)),
    { file: { type: 'string' }, domain: { type: 'string' }, 'max-removal-percent': { type: 'string' } },
    ['file'],
  )
  const domain = domainOption(o.domain)
  const dryRun = flag('--dry-run')
  const options = {
    domain,
    dryRun,
    allowMassRemoval: flag('--allow-mass-removal'),
    allowHeaderless: flag('--allow-headerless'),
    maxRemovalShare: removalShare(o['max-removal-percent']),
  }
  const path = o.file as string
  const text = await readPolicyText(path)
  if (typeof text !== 'string') {
    ctx.io.err(text.problem)
    return 2
  }
  return withService(ctx, async (service) => {
    let outcome
    try {
      outcome = await importPolicy(service, text, options)
    } catch (error) {
      if (error instanceof PolicyFileRefused) {
        ctx.io.err(`${path} was refused: ${error.message}; nothing was changed`)
        return 2
      }
      if (!(error instanceof PolicyFileError)) throw error
      for (const p of error.problems) ctx.io.err(`${path}:${p.line}: ${p.reason}`)
      if (error.total > error.problems.length) ctx.io.err(`… and ${error.total - error.problems.length} more`)
      ctx.io.err(`${path} was refused: ${error.message}; nothing was changed`)
      return 2
    }
    for (const { line, rule } of outcome.expired) ctx.io.out(`skipped ${path}:${line}: ${describeRule(rule)} has expired`)
    for (const line of describeDiff(outcome.diff)) ctx.io.out(line)
    ctx.io.out(summarizeDiff(outcome.diff))
    if (outcome.refusal !== null) {
      ctx.io.err(`${path} would be refused: ${outcome.refusal}`)
      ctx.io.out('dry run: nothing was written')
      return 2
    }
    if (dryRun) ctx.io.out('dry run: nothing was written')
    else if (outcome.applied) ctx.io.out(`applied in one transaction, revision ${outcome.revision}`)
    return 0
  })
}
