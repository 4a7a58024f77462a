import { ruleAdded, ruleRemoved } from '../domain/changes.js'
import { grantEntry, revokeEntry, roleHolder } from '../domain/audit.js'
import { assertMayGrant, assertMayRevoke } from '../domain/grantRules.js'
import { roleDomain } from '../domain/tenancy.js'
import type { AccessPreview } from '../engine/preview.js'
import type { Queryable } from '../storage/db.js'
import { deleteRule, insertRule } from '../storage/policyRows.js'
import { ensureSubRole } from '../storage/subRoles.js'
import { previewRoleRule, type DryRun } from './accessReview.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { assertSubRoleKnown } from './subRoles.js'
import { assertDomainExists, callerStanding, type PairInput, type PermissionChange } from './permissionContext.js'
import { isRootSubRole } from '../domain/root.js'

export type RoleChange = PermissionChange & { sub_role_code: string; preview?: AccessPreview }

/** The one write path of both role commands: the allow row, its audit entry, its change. */
async function writeRoleRule(
  ctx: CommandContext,
  caller: Caller,
  subRole: string,
  input: PairInput,
  domain: string,
  action: 'grant' | 'revoke',
): Promise<RoleChange> {
  const rule = [subRole, domain, input.obj, input.act, 'allow']
  const apply = async (tx: Queryable): Promise<boolean> => {
    if (action === 'revoke') return deleteRule(tx, 'p', rule)
    await ensureSubRole(tx, domain, subRole)
    return insertRule(tx, 'p', rule)
  }
  const outcome = await ctx.writes.run(async (tx) => ({
    changed: await apply(tx),
    audit: [(action === 'grant' ? grantEntry : revokeEntry)(roleHolder(subRole), { obj: input.obj, act: input.act, domain }, actorOf(caller))],
    changes: [action === 'grant' ? ruleAdded('p', rule) : ruleRemoved('p', rule)],
    result: null,
  }))
  return { changed: outcome.changed, revision: outcome.revision, sub_role_code: subRole, obj: input.obj, act: input.act, domain }
}

/** A dry run's answer: what the write would do, from memory, with nothing written or audited. */
async function previewRoleCommand(ctx: CommandContext, subRole: string, input: PairInput, domain: string, action: 'grant' | 'revoke'): Promise<RoleChange> {
  const { changed, revision, preview } = await previewRoleRule(ctx, subRole, input, domain, action)
  return { changed, revision, sub_role_code: subRole, obj: input.obj, act: input.act, domain, preview }
}

/** grant-role-permission: every user holding the sub-role in reach of the domain gets the pair. */
export async function grantRolePermission(ctx: CommandContext, caller: Caller, subRole: string, input: PairInput & DryRun): Promise<RoleChange> {
  const domain = roleDomain(caller.account, input.domain)
  await assertDomainExists(ctx.db, domain)
  // Role grants never expire: a caller holding the pair only until an override of its own expires may not give it to a role.
  assertMayGrant({
    ...callerStanding(ctx, caller, domain, input),
    expiresAt: null,
    targetIsRoot: isRootSubRole(ctx.engine, subRole),
    targetIsMerchantUser: false,
    targetRole: subRole,
  })
  await assertSubRoleKnown(ctx, domain, subRole)
  if (input.dry_run === true) return previewRoleCommand(ctx, subRole, input, domain, 'grant')
  return writeRoleRule(ctx, caller, subRole, input, domain, 'grant')
}

/** revoke-role-permission: the inverse of the grant, for every holder of the sub-role. */
export async function revokeRolePermission(ctx: CommandContext, caller: Caller, subRole: string, input: PairInput & DryRun): Promise<RoleChange> {
  const domain = roleDomain(caller.account, input.domain)
  await assertDomainExists(ctx.db, domain)
  // Only the role's allow row is removed: a role's deny is lifted by no command.
  assertMayRevoke(callerStanding(ctx, caller, domain, input))
  await assertSubRoleKnown(ctx, domain, subRole)
  if (input.dry_run === true) return previewRoleCommand(ctx, subRole, input, domain, 'revoke')
  return writeRoleRule(ctx, caller, subRole, input, domain, 'revoke')
}
