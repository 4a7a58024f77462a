import { assertMayGrant, assertMayRevoke } from '../domain/grantRules.js'
import type { Account } from '../domain/principals.js'
import { assertOverrideDomain, assertReachable, userDomain } from '../domain/tenancy.js'
import { deleteOverride, setOverride, type Effect } from '../storage/overrides.js'
import type { AccessPreview } from '../engine/preview.js'
import { previewUserOverride, type DryRun } from './accessReview.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { assertDomainExists, callerStanding, type PairInput, type PermissionChange } from './permissionContext.js'
import { ruleAdded, ruleRemoved, type StoreChange } from '../domain/changes.js'

export type UserChange = PermissionChange & { user_id: string; effect: Effect | null; preview?: AccessPreview }

async function resolveTarget(ctx: CommandContext, caller: Caller, userId: string, requested: string | undefined): Promise<{ target: Account; domain: string }> {
  const target = assertReachable(caller.account, await ctx.accounts.get(userId))
  const domain = userDomain(caller.account, target, requested)
  assertOverrideDomain(target, domain)
  await assertDomainExists(ctx.db, domain)
  return { target, domain }
}

/**
 * grant-user-permission (allow) and deny-user-permission (deny): one
 * override per (user, domain, pair); a deny replaces an allow and vice versa.
 */
export async function setUserPermission(
  ctx: CommandContext,
  caller: Caller,
  userId: string,
  input: PairInput & DryRun,
  effect: Effect,
): Promise<UserChange> {
  const { target, domain } = await resolveTarget(ctx, caller, userId, input.domain)
  assertMayGrant({ ...callerStanding(ctx, caller, domain, input), targetIsRoot: ctx.engine.isRootRole(target.sub_role_code), targetRole: target.sub_role_code })
  if (input.dry_run === true) {
    const { changed, revision, preview } = await previewUserOverride(ctx, target, input, domain, effect)
    return { changed, revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect, preview }
  }
  const key = { user_id: target.id, domain, obj: input.obj, act: input.act }
  const outcome = await ctx.writes.run(async (tx) => {
    const previous = await setOverride(tx, { ...key, effect }, caller.account.id)
    const changes: StoreChange[] = []
    if (previous !== null && previous !== effect) changes.push(ruleRemoved('p', [target.id, domain, input.obj, input.act, previous]))
    changes.push(ruleAdded('p', [target.id, domain, input.obj, input.act, effect]))
    return {
      changed: previous !== effect,
      audit: [{ action: effect === 'allow' ? ('grant' as const) : ('deny' as const), target_type: 'user' as const, target_id: target.id, obj: input.obj, act: input.act, domain, merchant_id: target.merchant_id, actor: actorOf(caller) }],
      changes,
      result: null,
    }
  })
  return { changed: outcome.changed, revision: outcome.revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect }
}

/** revoke-user-permission: removes the user's override for the pair, allow or deny; role grants stay. */
export async function revokeUserPermission(ctx: CommandContext, caller: Caller, userId: string, input: PairInput & DryRun): Promise<UserChange> {
  const { target, domain } = await resolveTarget(ctx, caller, userId, input.domain)
  assertMayRevoke(callerStanding(ctx, caller, domain, input))
  if (input.dry_run === true) {
    const { changed, revision, preview } = await previewUserOverride(ctx, target, input, domain, null)
    return { changed, revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect: null, preview }
  }
  const outcome = await ctx.writes.run(async (tx) => {
    const previous = await deleteOverride(tx, { user_id: target.id, domain, obj: input.obj, act: input.act })
    return {
      changed: previous !== null,
      audit: [{ action: 'revoke' as const, target_type: 'user' as const, target_id: target.id, obj: input.obj, act: input.act, domain, merchant_id: target.merchant_id, actor: actorOf(caller) }],
      changes: previous === null ? [] : [ruleRemoved('p', [target.id, domain, input.obj, input.act, previous])],
      result: previous,
    }
  })
  return { changed: outcome.changed, revision: outcome.revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect: null }
}
