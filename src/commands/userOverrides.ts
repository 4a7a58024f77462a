import { assertMayGrant, assertMayRevoke, liftedDeny } from '../domain/grantRules.js'
import type { Account } from '../domain/principals.js'
import { assertOverrideDomain, assertReachable, userDomain } from '../domain/tenancy.js'
import { ServiceError } from '../domain/errors.js'
import { overrideSetEntry, revokeEntry, userHolder, type AuditEntry } from '../domain/audit.js'
import { deleteOverride, setOverride, type Effect, type OverrideWrite } from '../storage/overrides.js'
import type { AccessPreview } from '../engine/preview.js'
import { previewUserOverride, type DryRun } from './accessReview.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { overrideExpired } from './sweepExpiredOverrides.js'
import { assertDomainExists, callerStanding, currentOverride, type PairInput, type PermissionChange } from './permissionContext.js'
import { ruleAdded, ruleRemoved, type StoreChange } from '../domain/changes.js'
import { isRootAccount } from '../domain/root.js'

export type UserChange = PermissionChange & { user_id: string; effect: Effect | null; expires_at: string | null; preview?: AccessPreview }

/** An override command's data: the pair, and for grant and deny an optional instant (RFC 3339) at which it stops counting. */
export type OverrideInput = PairInput & { expires_at?: string | undefined }

/** The expiry asked for, which must lie ahead: an override that never counts is refused rather than written. */
function expiryOf(ctx: CommandContext, input: OverrideInput): Date | null {
  if (input.expires_at === undefined) return null
  const at = new Date(input.expires_at)
  if (Number.isNaN(at.getTime()) || at.getTime() <= ctx.clock.now()) {
    throw new ServiceError('EXPIRY_NOT_IN_FUTURE', { expires_at: input.expires_at })
  }
  return at
}

/**
 * What a write found that had expired (no replica counted it any more, the
 * sweep had not removed it yet): its removal is audited as the sweep would have.
 */
function expiredParts(write: OverrideWrite, target: Account, domain: string, input: PairInput): { audit: AuditEntry[]; changes: StoreChange[] } {
  if (write.expired === null) return { audit: [], changes: [] }
  const { audit, change } = overrideExpired({ user_id: target.id, domain, obj: input.obj, act: input.act, effect: write.expired.effect }, target.merchant_id)
  return { audit: [audit], changes: [change] }
}

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
  input: OverrideInput & DryRun,
  effect: Effect,
): Promise<UserChange> {
  const { target, domain } = await resolveTarget(ctx, caller, userId, input.domain)
  const expiresAt = expiryOf(ctx, input)
  const current = currentOverride(ctx.engine, target.id, domain, input.obj, input.act)
  assertMayGrant({
    ...callerStanding(ctx, caller, domain, input),
    expiresAt: expiresAt?.getTime() ?? null,
    targetIsRoot: isRootAccount(ctx.engine, target),
    targetIsMerchantUser: target.principal_type === 'merchant',
    targetRole: target.sub_role_code,
    liftedDenyUntil: liftedDeny(current, { effect, expiresAt: expiresAt?.getTime() ?? null }),
  })
  if (input.dry_run === true) {
    const { changed, revision, preview } = await previewUserOverride(ctx, target, input, domain, effect)
    // The same effect with another expiry is still a change, though no decision moves.
    const sameExpiry = ctx.engine.overrideExpiresAt(target.id, domain, input.obj, input.act) === (expiresAt?.getTime() ?? null)
    return { changed: changed || !sameExpiry, revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect, expires_at: expiresAt?.toISOString() ?? null, preview }
  }
  const key = { user_id: target.id, domain, obj: input.obj, act: input.act }
  const outcome = await ctx.writes.run(async (tx) => {
    const write = await setOverride(tx, { ...key, effect, expires_at: expiresAt }, caller.account.id, new Date(ctx.clock.now()))
    const { previous } = write
    const expired = expiredParts(write, target, domain, input)
    const changes: StoreChange[] = [...expired.changes]
    if (previous !== null && previous.effect !== effect) changes.push(ruleRemoved('p', [target.id, domain, input.obj, input.act, previous.effect]))
    changes.push(ruleAdded('p', [target.id, domain, input.obj, input.act, effect], expiresAt))
    const changed = previous === null || previous.effect !== effect || previous.expires_at?.getTime() !== expiresAt?.getTime()
    return {
      changed,
      audit: [...expired.audit, overrideSetEntry(effect, userHolder(target), { obj: input.obj, act: input.act, domain }, actorOf(caller))],
      changes,
      result: null,
    }
  })
  return {
    changed: outcome.changed,
    revision: outcome.revision,
    user_id: target.id,
    obj: input.obj,
    act: input.act,
    domain,
    effect,
    expires_at: expiresAt?.toISOString() ?? null,
  }
}

/** revoke-user-permission: removes the user's override for the pair, allow or deny; role grants stay. */
export async function revokeUserPermission(ctx: CommandContext, caller: Caller, userId: string, input: PairInput & DryRun): Promise<UserChange> {
  const { target, domain } = await resolveTarget(ctx, caller, userId, input.domain)
  const current = currentOverride(ctx.engine, target.id, domain, input.obj, input.act)
  assertMayRevoke({ ...callerStanding(ctx, caller, domain, input), liftedDenyUntil: liftedDeny(current, null) })
  if (input.dry_run === true) {
    const { changed, revision, preview } = await previewUserOverride(ctx, target, input, domain, null)
    return { changed, revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect: null, expires_at: null, preview }
  }
  const outcome = await ctx.writes.run(async (tx) => {
    const write = await deleteOverride(tx, { user_id: target.id, domain, obj: input.obj, act: input.act }, new Date(ctx.clock.now()))
    const { previous } = write
    const expired = expiredParts(write, target, domain, input)
    const revoked = previous === null ? [] : [revokeEntry(userHolder(target), { obj: input.obj, act: input.act, domain }, actorOf(caller))]
    return {
      // An expired row cleared on the way is written (with its own entry), but the revoke itself changed nothing.
      changed: previous !== null || write.expired !== null,
      audit: [...expired.audit, ...revoked],
      changes: [...expired.changes, ...(previous === null ? [] : [ruleRemoved('p', [target.id, domain, input.obj, input.act, previous.effect])])],
      result: previous !== null,
    }
  })
  return { changed: outcome.result, revision: outcome.revision, user_id: target.id, obj: input.obj, act: input.act, domain, effect: null, expires_at: null }
}
