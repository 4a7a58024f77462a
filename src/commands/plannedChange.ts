import type { AuditEntry } from '../domain/audit.js'
import type { StoreChange } from '../domain/changes.js'
import type { RuleChange } from '../engine/decisionIndex.js'
import { mergePreviews, previewUsers, type AccessPreview, type Reached } from '../engine/preview.js'
import type { Queryable } from '../storage/db.js'
import { currentRevision } from '../storage/revision.js'
import type { CommandContext } from './context.js'

/** What one permission change wrote in the write's transaction. */
export interface WrittenChange {
  /** The change itself altered a row (the answer's `changed`). */
  changed: boolean
  /** Something was written (the change, or an expired row cleared on the way): the transaction must make a revision. */
  wrote: boolean
  audit: AuditEntry[]
  changes: StoreChange[]
}

/**
 * One grant, deny or revoke, checked against its command's rules and ready
 * to be written (alone, or in a list with others) or previewed. A single
 * command and apply-permission-changes plan each kind with the same function.
 */
export interface PlannedChange {
  obj: string
  act: string
  /** The domain the change was resolved to. */
  domain: string
  /** What it changes as `<holder kind>:<holder>`: two changes of one list on the same key are refused. */
  holder: string
  /** The p rows memory would gain and lose, read now (later changes of a list and previews lay them over the policy). */
  rows: RuleChange[]
  /** Whether a dry run reports a change: a row moves, or only an override's expiry. */
  wouldChange: boolean
  /** The users its rows may reach, each with the domain it is decided in. */
  reach(): Reached[]
  /** Its rows, audit entries and feed changes, in the write's transaction. */
  write(tx: Queryable): Promise<WrittenChange>
  /**
   * A role change's one row, for a list to write with the others in
   * multi-row statements: then `written` says what it did, as `write` would.
   */
  roleRow?: { rule: string[]; remove: boolean; written(changed: boolean): WrittenChange }
}

/** What a dry run answers in place of the write's outcome. */
export interface PreviewOutcome {
  changed: boolean
  /** The store's revision now: nothing was written. */
  revision: number
  preview: AccessPreview
}

/**
 * The combined preview of changes laid over the policy together: each
 * reached user decided before and after, once per pair. A decision of a
 * pair is read from that pair's rows alone (the decision index folds one
 * pair), so each pair is decided with its own rows: the work is the reach
 * of each pair times its rows, never the whole list per user.
 */
export async function previewPlanned(ctx: Pick<CommandContext, 'engine' | 'db'>, planned: readonly PlannedChange[]): Promise<PreviewOutcome> {
  const byPair = new Map<string, { obj: string; act: string; rows: RuleChange[]; reached: Map<string, Reached> }>()
  for (const change of planned) {
    if (change.rows.length === 0) continue
    const key = `${change.obj}\u0000${change.act}`
    let pair = byPair.get(key)
    if (pair === undefined) {
      pair = { obj: change.obj, act: change.act, rows: [], reached: new Map() }
      byPair.set(key, pair)
    }
    pair.rows.push(...change.rows)
    for (const r of change.reach()) pair.reached.set(`${r.account.id}\u0000${r.domain}`, r)
  }
  const previews = [...byPair.values()].map((p) => previewUsers(ctx.engine, [...p.reached.values()], p.obj, p.act, p.rows))
  return { changed: planned.some((p) => p.wouldChange), revision: await currentRevision(ctx.db), preview: mergePreviews(previews) }
}

/** A single command's answer: the preview for a dry run, else the change written through the write queue. */
export async function runPlanned(ctx: CommandContext, planned: PlannedChange, dryRun: boolean | undefined): Promise<{ changed: boolean; revision: number; preview?: AccessPreview }> {
  if (dryRun === true) return previewPlanned(ctx, [planned])
  const planWrite = (written: WrittenChange) => ({ changed: written.wrote, audit: written.audit, changes: written.changes, result: written.changed })
  const { roleRow } = planned
  // Its transaction reads only the rows it writes (the checks ran above, on memory): it may share one with other single changes.
  const outcome = await ctx.writes.run(async (tx) => planWrite(await planned.write(tx)), {
    shared: true,
    ...(roleRow !== undefined ? { row: { rule: roleRow.rule, remove: roleRow.remove, planned: (changed: boolean) => planWrite(roleRow.written(changed)) } } : {}),
  })
  return { changed: outcome.result, revision: outcome.revision }
}
