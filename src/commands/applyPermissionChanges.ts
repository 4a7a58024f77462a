import { ServiceError, isServiceError, type FieldError } from '../domain/errors.js'
import { permissionName } from '../domain/permissions.js'
import { KIND_PERMISSION, MAX_CHANGES_PER_CALL, type ChangeKind } from '../domain/permissionChanges.js'
import { homeDomain } from '../domain/principals.js'
import type { RuleChange } from '../engine/decisionIndex.js'
import type { AccessPreview } from '../engine/preview.js'
import type { DryRun } from './accessReview.js'
import { planRoleChange } from './changeRolePermission.js'
import type { Caller, CommandContext } from './context.js'
import { previewPlanned, type PlannedChange, type WrittenChange } from './plannedChange.js'
import type { ListSoFar } from './permissionContext.js'
import type { Queryable } from '../storage/db.js'
import { writeRoleRows } from '../storage/policyRows.js'
import { planUserChange } from './userOverrides.js'

export interface ChangeInput {
  kind: ChangeKind
  sub_role?: string | undefined
  user_id?: string | undefined
  obj: string
  act: string
  domain?: string | undefined
  expires_at?: string | undefined
}

export interface AppliedChanges {
  /** The store's revision after the call (now, for a dry run or when nothing changed). */
  revision: number
  /** How many changes altered anything. */
  changed: number
  results: Array<{ index: number; changed: boolean }>
  /** A dry run's combined preview. */
  preview?: AccessPreview
}

/** A refusal names the change it is about: `errors` holds `changes.<index>` (with the field, when one field is at fault). */
function atIndex(error: unknown, index: number): unknown {
  if (!isServiceError(error)) return error
  const own: FieldError[] = error.fieldErrors ?? []
  return new ServiceError(error.code, { ...error.params, index }, own.length > 0 ? own : [{ field: `changes.${index}`, message: 'refused' }])
}

/** The fields one kind takes: a role kind names `sub_role`, a user kind `user_id`; only user grants and denies expire. */
function assertFieldsOfKind(change: ChangeInput, index: number): void {
  const role = change.kind.startsWith('role_')
  const problems: FieldError[] = []
  if (role ? change.sub_role === undefined : change.user_id === undefined) problems.push({ field: `changes.${index}.${role ? 'sub_role' : 'user_id'}`, message: 'required' })
  const stray = role ? change.user_id : change.sub_role
  if (stray !== undefined) problems.push({ field: `changes.${index}.${role ? 'user_id' : 'sub_role'}`, message: 'additionalProperties' })
  if (change.expires_at !== undefined && (role || change.kind === 'user_revoke')) problems.push({ field: `changes.${index}.expires_at`, message: 'additionalProperties' })
  if (problems.length > 0) throw new ServiceError('VALIDATION_FAILED', { index }, problems)
}

/** The route's permission for each kind present, in the caller's home domain, as each kind's own route asks it. */
function assertHoldsKindPermissions(ctx: Pick<CommandContext, 'engine'>, caller: Caller, changes: readonly ChangeInput[]): void {
  const needed = new Set(changes.map((c) => KIND_PERMISSION[c.kind]))
  for (const permission of needed) {
    if (!ctx.engine.decide(caller.account, homeDomain(caller.account), permission.obj, permission.act)) {
      throw new ServiceError('PERMISSION_DENIED', { permission: permissionName(permission) })
    }
  }
}

/** Plans one change with its kind's own planner. */
function planOne(ctx: CommandContext, caller: Caller, change: ChangeInput, list: ListSoFar): Promise<PlannedChange> {
  const pair = { obj: change.obj, act: change.act, domain: change.domain }
  switch (change.kind) {
    case 'role_grant':
      return planRoleChange(ctx, caller, change.sub_role ?? '', pair, 'grant', list)
    case 'role_deny':
      return planRoleChange(ctx, caller, change.sub_role ?? '', pair, 'deny', list)
    case 'role_revoke':
      return planRoleChange(ctx, caller, change.sub_role ?? '', pair, 'revoke', list)
    case 'user_grant':
      return planUserChange(ctx, caller, change.user_id ?? '', { ...pair, expires_at: change.expires_at }, 'allow', list)
    case 'user_deny':
      return planUserChange(ctx, caller, change.user_id ?? '', { ...pair, expires_at: change.expires_at }, 'deny', list)
    case 'user_revoke':
      return planUserChange(ctx, caller, change.user_id ?? '', pair, null, list)
  }
}

/**
 * Each change checked in list order with its kind's rules, as if the earlier
 * ones had been written (their rows of the same pair laid over the policy).
 * Two changes of one holder, domain and pair are refused: the same kind twice
 * is a duplicate, two kinds a contradiction (the list's order would decide).
 */
async function planAll(ctx: CommandContext, caller: Caller, changes: readonly ChangeInput[]): Promise<PlannedChange[]> {
  const planned: PlannedChange[] = []
  const rowsOfPair = new Map<string, RuleChange[]>()
  const firstOfKey = new Map<string, number>()
  const domains = new Set<string>()
  for (const [index, change] of changes.entries()) {
    try {
      assertFieldsOfKind(change, index)
      const pairKey = `${change.obj}\u0000${change.act}`
      const p = await planOne(ctx, caller, change, { earlier: rowsOfPair.get(pairKey) ?? [], domains })
      const key = `${p.holder}\u0000${p.domain}\u0000${pairKey}`
      const first = firstOfKey.get(key)
      if (first !== undefined) {
        const code = changes[first]?.kind === change.kind ? 'DUPLICATE_CHANGE' : 'CONTRADICTING_CHANGES'
        throw new ServiceError(code, { first, obj: p.obj, act: p.act, domain: p.domain })
      }
      firstOfKey.set(key, index)
      const rows = rowsOfPair.get(pairKey) ?? []
      rows.push(...p.rows)
      rowsOfPair.set(pairKey, rows)
      planned.push(p)
    } catch (error) {
      throw atIndex(error, index)
    }
  }
  return planned
}

/**
 * Every change's write, in list order: role rows in one multi-row
 * statement (no two changes of a list touch one row), overrides one by one
 * (each reads what it replaces).
 */
async function writeAll(tx: Queryable, planned: readonly PlannedChange[]): Promise<WrittenChange[]> {
  const roleRows = planned.flatMap((p) => (p.roleRow === undefined ? [] : [p.roleRow]))
  // A list names each pair of a holder once (refused otherwise), so no rule comes twice.
  const done = await writeRoleRows(tx, roleRows)
  const outcomes = new Map<PlannedChange['roleRow'], boolean>(roleRows.map((r, i) => [r, done[i] === true]))
  const written: WrittenChange[] = []
  for (const p of planned) written.push(p.roleRow === undefined ? await p.write(tx) : p.roleRow.written(outcomes.get(p.roleRow) === true))
  return written
}

/**
 * apply-permission-changes: up to MAX_CHANGES_PER_CALL grants, denies and
 * revokes of roles and users, all or none, in one write: each change keeps
 * its own audit entry, the call makes one revision. The first refusal
 * answers, naming its index; nothing is written. `dry_run`: the combined
 * preview of the list's net effect, nothing written.
 */
export async function applyPermissionChanges(ctx: CommandContext, caller: Caller, input: { changes: ChangeInput[] } & DryRun): Promise<AppliedChanges> {
  const { changes } = input
  // The route's schema refuses a longer list the same way before it is read; this holds for every other caller.
  if (changes.length > MAX_CHANGES_PER_CALL) throw new ServiceError('VALIDATION_FAILED', {}, [{ field: 'changes', message: 'invalid' }])
  assertHoldsKindPermissions(ctx, caller, changes)
  const planned = await planAll(ctx, caller, changes)
  if (input.dry_run === true) {
    const { revision, preview } = await previewPlanned(ctx, planned)
    const results = planned.map((p, index) => ({ index, changed: p.wouldChange }))
    return { revision, changed: results.filter((r) => r.changed).length, results, preview }
  }
  const outcome = await ctx.writes.run(async (tx) => {
    const written = await writeAll(tx, planned)
    return {
      changed: written.some((w) => w.wrote),
      audit: written.flatMap((w) => w.audit),
      changes: written.flatMap((w) => w.changes),
      result: written.map((w, index) => ({ index, changed: w.changed })),
    }
  })
  const results = outcome.result
  return { revision: outcome.revision, changed: results.filter((r) => r.changed).length, results }
}
