import { deactivatedEntry, reactivatedEntry, roleChangedEntry } from '../domain/audit.js'
import { ruleAdded, ruleRemoved } from '../domain/changes.js'
import { ServiceError } from '../domain/errors.js'
import { assertMayChangeAccount } from '../domain/grantRules.js'
import { homeDomain, type Account, type AccountStatus } from '../domain/principals.js'
import { assertReachable } from '../domain/tenancy.js'
import { insertRule, deleteRule } from '../storage/policyRows.js'
import { otherActiveSystemRoots, setStatus, setSubRole } from '../storage/accounts.js'
import { ensureSubRole } from '../storage/subRoles.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { holdsUntil } from './permissionContext.js'
import { assertSubRoleKnown } from './subRoles.js'
import { isRootAccount, isRootSubRole } from '../domain/root.js'

export interface AccountChange {
  changed: boolean
  revision: number
  account: Account
}

/**
 * The pairs of the catalog that `subRole` holds in `domain` and the caller
 * does not hold there for good (not at all, or only until an override of its
 * own expires): what it may not hand out with an account.
 */
export function beyondCaller(ctx: Pick<CommandContext, 'engine'>, caller: Caller, subRole: string, domain: string): string[] {
  const { engine } = ctx
  return engine
    .catalogEntries()
    .filter(
      (e) =>
        engine.subRoleAllows(subRole, domain, e.obj, e.act) &&
        (!engine.decide(caller.account, domain, e.obj, e.act) || holdsUntil(engine, caller.account, domain, e.obj, e.act) !== null),
    )
    .map((e) => `${e.obj}:${e.act}`)
}

/**
 * The pairs `target` holds in its home domain and the caller does not hold
 * there. The account is taken as active: a reactivation gives it its set back,
 * and a deactivated account keeps its rows.
 */
export function heldByTargetOnly(ctx: Pick<CommandContext, 'engine'>, caller: Caller, target: Account): string[] {
  const { engine } = ctx
  const home = homeDomain(target)
  const active = { ...target, status: 'active' as const }
  return engine
    .catalogEntries()
    .filter((e) => engine.decide(active, home, e.obj, e.act) && !engine.decide(caller.account, home, e.obj, e.act))
    .map((e) => `${e.obj}:${e.act}`)
}

/**
 * change-sub-role: moves the account to another sub-role in its home domain,
 * its `g` row and its audit entry in one transaction. The caller must hold
 * everything the account holds there now and everything the new sub-role
 * holds there; root is neither given nor taken away this way.
 */
export async function changeSubRole(ctx: CommandContext, caller: Caller, userId: string, subRole: string): Promise<AccountChange> {
  const target = assertReachable(caller.account, await ctx.accounts.get(userId))
  if (isRootSubRole(ctx.engine, subRole) || isRootAccount(ctx.engine, target)) {
    throw new ServiceError('ROOT_ROLE_NOT_CHANGEABLE')
  }
  const home = homeDomain(target)
  assertMayChangeAccount({
    callerIsRoot: isRootAccount(ctx.engine, caller.account),
    heldByTargetOnly: heldByTargetOnly(ctx, caller, target),
    newSubRoleBeyondCaller: beyondCaller(ctx, caller, subRole, home),
    domain: home,
  })
  await assertSubRoleKnown(ctx, home, subRole)
  const outcome = await ctx.writes.run(async (tx) => {
    await ensureSubRole(tx, home, subRole)
    const moved = await setSubRole(tx, target.id, subRole)
    if (moved === null) return { changed: false, audit: [], changes: [], result: target }
    const before = [target.id, moved.previous, home]
    const after = [target.id, subRole, home]
    await deleteRule(tx, 'g', before)
    await insertRule(tx, 'g', after)
    return {
      changed: true,
      audit: [roleChangedEntry(target, actorOf(caller))],
      changes: [ruleRemoved('g', before), ruleAdded('g', after), { kind: 'account' as const, account: moved.account }],
      result: moved.account,
    }
  })
  return { changed: outcome.changed, revision: outcome.revision, account: outcome.result }
}

/**
 * deactivate-admin and reactivate-admin. Only root callers switch a root
 * account, other callers only accounts whose effective set they hold, and
 * the last active system-owner super_admin stays on (nobody could
 * administer the platform otherwise).
 */
export async function setAccountStatus(ctx: CommandContext, caller: Caller, userId: string, status: AccountStatus): Promise<AccountChange> {
  const target = assertReachable(caller.account, await ctx.accounts.get(userId))
  assertMayChangeAccount({
    callerIsRoot: isRootAccount(ctx.engine, caller.account),
    targetRoot: isRootAccount(ctx.engine, target) ? target.sub_role_code : null,
    heldByTargetOnly: heldByTargetOnly(ctx, caller, target),
    newSubRoleBeyondCaller: [],
    domain: homeDomain(target),
  })
  const outcome = await ctx.writes.run(async (tx) => {
    if (status === 'deactivated' && target.principal_type === 'system_owner' && isRootAccount(ctx.engine, target)) {
      if ((await otherActiveSystemRoots(tx, target.id)) === 0) throw new ServiceError('LAST_SYSTEM_OWNER')
    }
    const updated = await setStatus(tx, target.id, status, new Date(ctx.clock.now()))
    if (updated === null) return { changed: false, audit: [], changes: [], result: target }
    return {
      changed: true,
      audit: [(status === 'deactivated' ? deactivatedEntry : reactivatedEntry)(target, actorOf(caller))],
      changes: [{ kind: 'account' as const, account: updated }],
      result: updated,
    }
  })
  return { changed: outcome.changed, revision: outcome.revision, account: outcome.result }
}

/** What an admin may do to an account row, as the console offers it. */
export const ACCOUNT_ACTIONS = ['change-sub-role', 'deactivate', 'reactivate'] as const
export type AccountAction = (typeof ACCOUNT_ACTIONS)[number]

/**
 * The account actions the rules above let `caller` take on `target` (given
 * the route permission `admin:manage`, which the caller's permissions say):
 * the same assertMayChangeAccount the commands run, a root account never
 * moved, the last active system-owner root never switched off. A new
 * sub-role is checked when it is named (assertMayAssignSubRole).
 */
export async function allowedActions(ctx: Pick<CommandContext, 'engine' | 'db'>, caller: Caller, target: Account): Promise<AccountAction[]> {
  const targetIsRoot = isRootAccount(ctx.engine, target)
  const rulesAllow = (targetRoot: string | null) => {
    try {
      assertMayChangeAccount({
        callerIsRoot: isRootAccount(ctx.engine, caller.account),
        targetRoot,
        heldByTargetOnly: heldByTargetOnly(ctx, caller, target),
        newSubRoleBeyondCaller: [],
        domain: homeDomain(target),
      })
      return true
    } catch (error) {
      if (error instanceof ServiceError) return false
      throw error
    }
  }
  const actions: AccountAction[] = []
  if (!targetIsRoot && rulesAllow(null)) actions.push('change-sub-role')
  if (rulesAllow(targetIsRoot ? target.sub_role_code : null)) {
    if (target.status === 'deactivated') actions.push('reactivate')
    else if (!(targetIsRoot && target.principal_type === 'system_owner' && (await otherActiveSystemRoots(ctx.db, target.id)) === 0)) actions.push('deactivate')
  }
  return actions
}
