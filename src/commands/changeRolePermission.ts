import { ruleAdded, ruleRemoved } from '../domain/changes.js'
import { denyEntry, grantEntry, revokeEntry, roleHolder } from '../domain/audit.js'
import { assertMayGrant, assertMayRevoke } from '../domain/grantRules.js'
import { roleDomain } from '../domain/tenancy.js'
import type { RuleChange } from '../engine/decisionIndex.js'
import type { AccessPreview } from '../engine/preview.js'
import { roleReach } from '../engine/preview.js'
import type { Queryable } from '../storage/db.js'
import { writeRoleRows } from '../storage/policyRows.js'
import type { DryRun } from './accessReview.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { assertSubRoleKnown } from './subRoles.js'
import { assertDomainExists, callerStanding, type ListSoFar, type PairInput, type PermissionChange } from './permissionContext.js'
import { runPlanned, type PlannedChange, type WrittenChange } from './plannedChange.js'
import { isRootSubRole } from '../domain/root.js'

export type RoleChange = PermissionChange & { sub_role_code: string; preview?: AccessPreview }

/** grant and deny add the role's row of that effect; revoke removes its allow row only. */
export type RoleAction = 'grant' | 'deny' | 'revoke'

/**
 * A role change checked against the rules of its command: the domain (the
 * caller's, for a merchant caller) exists, the caller may make the change,
 * the sub-role is known. `earlier`: the rows a list's earlier changes of the
 * same pair add and remove. A deny follows a grant's rules (it is acting on
 * the pair, never on a root sub-role); only a list or an import makes one.
 */
export async function planRoleChange(
  ctx: CommandContext,
  caller: Caller,
  subRole: string,
  input: PairInput,
  action: RoleAction,
  list?: ListSoFar,
): Promise<PlannedChange> {
  const domain = roleDomain(caller.account, input.domain)
  await assertDomainExists(ctx.db, domain, list?.domains)
  const standing = callerStanding(ctx, caller, domain, input, list?.earlier)
  if (action === 'revoke') {
    // Only the role's allow row is removed: a role's deny is lifted by no command.
    assertMayRevoke(standing)
  } else {
    // Role rows never expire: a caller holding the pair only until an override of its own expires may not give it to a role.
    assertMayGrant({ ...standing, expiresAt: null, targetIsRoot: isRootSubRole(ctx.engine, subRole), targetIsMerchantUser: false, targetRole: subRole })
  }
  await assertSubRoleKnown(ctx, domain, subRole)
  const rule = [subRole, domain, input.obj, input.act, action === 'deny' ? 'deny' : 'allow']
  const held = ctx.engine.policy.hasPolicy(rule) === true
  const rows: RuleChange[] = action === 'revoke' ? (held ? [{ op: 'remove', rule }] : []) : held ? [] : [{ op: 'add', rule }]
  const pair = { obj: input.obj, act: input.act, domain }
  const entry = action === 'grant' ? grantEntry : action === 'deny' ? denyEntry : revokeEntry
  const written = (changed: boolean): WrittenChange => ({
    changed,
    wrote: changed,
    audit: [entry(roleHolder(subRole), pair, actorOf(caller))],
    changes: [action === 'revoke' ? ruleRemoved('p', rule) : ruleAdded('p', rule)],
  })
  const remove = action === 'revoke'
  // The sub-role made where it is first used, and the row, in one statement.
  const write = async (tx: Queryable) => written((await writeRoleRows(tx, [{ rule, remove }]))[0] === true)
  return {
    ...pair,
    holder: `role:${subRole}`,
    rows,
    wouldChange: rows.length > 0,
    reach: () => roleReach(ctx.engine, ctx.accounts, subRole, domain),
    write,
    roleRow: { rule, remove, written },
  }
}

async function runRoleCommand(ctx: CommandContext, caller: Caller, subRole: string, input: PairInput & DryRun, action: RoleAction): Promise<RoleChange> {
  const planned = await planRoleChange(ctx, caller, subRole, input, action)
  const outcome = await runPlanned(ctx, planned, input.dry_run)
  return { ...outcome, sub_role_code: subRole, obj: input.obj, act: input.act, domain: planned.domain }
}

/** grant-role-permission: every user holding the sub-role in reach of the domain gets the pair. */
export async function grantRolePermission(ctx: CommandContext, caller: Caller, subRole: string, input: PairInput & DryRun): Promise<RoleChange> {
  return runRoleCommand(ctx, caller, subRole, input, 'grant')
}

/** revoke-role-permission: the inverse of the grant, for every holder of the sub-role. */
export async function revokeRolePermission(ctx: CommandContext, caller: Caller, subRole: string, input: PairInput & DryRun): Promise<RoleChange> {
  return runRoleCommand(ctx, caller, subRole, input, 'revoke')
}
