import { assertMayGrant, assertMayRevoke, liftedDeny } from '../domain/grantRules.js'
import type { Account } from '../domain/principals.js'
import { assertOverrideDomain, assertReachable, userDomain } from '../domain/tenancy.js'
import { ServiceError } from '../domain/errors.js'
import { overrideSetEntry, revokeEntry, userHolder, type AuditEntry } from '../domain/audit.js'
import { deleteOverride, setOverride, type Effect, type OverrideWrite } from '../storage/overrides.js'
import type { AccessPreview } from '../engine/preview.js'
import type { DryRun } from './accessReview.js'
import type { RuleChange } from '../engine/decisionIndex.js'
import type { Queryable } from '../storage/db.js'
import { runPlanned, type PlannedChange, type WrittenChange } from './plannedChange.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { overrideExpired } from './sweepExpiredOverrides.js'
import { assertDomainExists, callerStanding, currentOverride, type ListSoFar, type PairInput, type PermissionChange } from './permissionContext.js'
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

async function resolveTarget(
  ctx: CommandContext,
  caller: Caller,
  userId: string,
  requested: string | undefined,
  knownDomains?: Set<string>,
): Promise<{ target: Account; domain: string }> {
  const target = assertReachable(caller.account, await ctx.accounts.get(userId))
  const domain = userDomain(caller.account, target, requested)
  assertOverrideDomain(target, domain)
  await assertDomainExists(ctx.db, domain, knownDomains)
  return { target, domain }
}

/**
 * A user override change checked against the rules of its command: the user
 * is in the caller's reach, the domain is one its overrides may name, the
 * caller may make the change. `effect` null: the override is removed
 * (revoke). `list`: what a list's earlier changes left (their rows of the
 * same pair, the domains found).
 */
export async function planUserChange(
  ctx: CommandContext,
  caller: Caller,
  userId: string,
  input: OverrideInput,
  effect: Effect | null,
  list?: ListSoFar,
): Promise<PlannedChange & { target: Account; expiresAt: Date | null }> {
  const { target, domain } = await resolveTarget(ctx, caller, userId, input.domain, list?.domains)
  const expiresAt = effect === null ? null : expiryOf(ctx, input)
  const current = currentOverride(ctx.engine, target.id, domain, input.obj, input.act)
  const standing = callerStanding(ctx, caller, domain, input, list?.earlier)
  const until = expiresAt?.getTime() ?? null
  if (effect === null) assertMayRevoke({ ...standing, liftedDenyUntil: liftedDeny(current, null) })
  else {
    assertMayGrant({
      ...standing,
      expiresAt: until,
      targetIsRoot: isRootAccount(ctx.engine, target),
      targetIsMerchantUser: target.principal_type === 'merchant',
      targetRole: target.sub_role_code,
      liftedDenyUntil: liftedDeny(current, { effect, expiresAt: until }),
    })
  }
  const row = (eft: string) => [target.id, domain, input.obj, input.act, eft]
  const previous = current?.effect ?? null
  const rows: RuleChange[] = []
  if (previous !== null && previous !== effect) rows.push({ op: 'remove', rule: row(previous) })
  if (effect !== null && previous !== effect) rows.push({ op: 'add', rule: row(effect) })
  // The same effect with another expiry is still a change, though no decision moves.
  const sameExpiry = effect === null || ctx.engine.overrideExpiresAt(target.id, domain, input.obj, input.act) === until
  const pair = { obj: input.obj, act: input.act, domain }
  const key = { user_id: target.id, ...pair }
  const write = async (tx: Queryable): Promise<WrittenChange> => {
    const now = new Date(ctx.clock.now())
    if (effect === null) {
      const written = await deleteOverride(tx, key, now)
      const expired = expiredParts(written, target, domain, input)
      const gone = written.previous
      return {
        changed: gone !== null,
        // An expired row cleared on the way is written (with its own entry), but the revoke itself changed nothing.
        wrote: gone !== null || written.expired !== null,
        audit: [...expired.audit, ...(gone === null ? [] : [revokeEntry(userHolder(target), pair, actorOf(caller))])],
        changes: [...expired.changes, ...(gone === null ? [] : [ruleRemoved('p', row(gone.effect))])],
      }
    }
    const written = await setOverride(tx, { ...key, effect, expires_at: expiresAt }, caller.account.id, now)
    const { previous: was } = written
    const expired = expiredParts(written, target, domain, input)
    const changes: StoreChange[] = [...expired.changes]
    if (was !== null && was.effect !== effect) changes.push(ruleRemoved('p', row(was.effect)))
    changes.push(ruleAdded('p', row(effect), expiresAt))
    const changed = was === null || was.effect !== effect || was.expires_at?.getTime() !== expiresAt?.getTime()
    return { changed, wrote: changed, audit: [...expired.audit, overrideSetEntry(effect, userHolder(target), pair, actorOf(caller))], changes }
  }
  return {
    ...pair,
    holder: `user:${target.id}`,
    rows,
    wouldChange: rows.length > 0 || !sameExpiry,
    reach: () => [{ account: target, domain }],
    write,
    target,
    expiresAt,
  }
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
  const planned = await planUserChange(ctx, caller, userId, input, effect)
  const outcome = await runPlanned(ctx, planned, input.dry_run)
  return { ...outcome, user_id: planned.target.id, obj: input.obj, act: input.act, domain: planned.domain, effect, expires_at: planned.expiresAt?.toISOString() ?? null }
}

/** revoke-user-permission: removes the user's override for the pair, allow or deny; role grants stay. */
export async function revokeUserPermission(ctx: CommandContext, caller: Caller, userId: string, input: PairInput & DryRun): Promise<UserChange> {
  const planned = await planUserChange(ctx, caller, userId, input, null)
  const outcome = await runPlanned(ctx, planned, input.dry_run)
  return { ...outcome, user_id: planned.target.id, obj: input.obj, act: input.act, domain: planned.domain, effect: null, expires_at: null }
}
