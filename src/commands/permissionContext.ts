import { ServiceError } from '../domain/errors.js'
import { GLOBAL_DOMAIN } from '../domain/principals.js'
import type { GrantCheck, OverrideTerm } from '../domain/grantRules.js'
import type { RuleChange } from '../engine/decisionIndex.js'
import type { PermissionEngine, Subject } from '../engine/engine.js'
import type { Queryable } from '../storage/db.js'
import type { Caller, CommandContext } from './context.js'
import { merchantExists } from '../storage/merchants.js'
import { isRootAccount } from '../domain/root.js'

/** A domain is `global` or the id of a merchant that exists; anything else is answered 404. `known`: domains found already (a list's changes share a few). */
export async function assertDomainExists(db: Queryable, domain: string, known?: Set<string>): Promise<void> {
  if (domain === GLOBAL_DOMAIN || known?.has(domain) === true) return
  if (!(await merchantExists(db, domain))) throw new ServiceError('MERCHANT_NOT_FOUND', { merchant_id: domain })
  known?.add(domain)
}

/** What a list's earlier changes left for the next one's checks: their rows of its pair, and the domains found to exist. */
export interface ListSoFar {
  earlier: readonly RuleChange[]
  domains: Set<string>
}

export interface PairInput {
  obj: string
  act: string
  domain?: string | undefined
}

export interface PermissionChange {
  changed: boolean
  revision: number
  obj: string
  act: string
  domain: string
}

/**
 * Until when `subject` holds the pair in `domain` (epoch ms), or null when no
 * expiry ends it (or it does not hold the pair at all). Its own expiring
 * allows of the pair there and in `global` are taken away soonest first, as
 * the clock would: the instant of the one whose loss ends the holding is the
 * answer. The model decides each step (decideAfter), so a role grant or a
 * permanent override that keeps the pair makes the holding permanent.
 * `earlier`: rows of a list's earlier changes, laid over the policy first.
 */
export function holdsUntil(engine: PermissionEngine, subject: Subject, domain: string, obj: string, act: string, earlier: readonly RuleChange[] = []): number | null {
  if (isRootAccount(engine, subject) || !decidesAfter(engine, subject, domain, obj, act, earlier)) return null
  const domains = domain === GLOBAL_DOMAIN ? [GLOBAL_DOMAIN] : [domain, GLOBAL_DOMAIN]
  const expiring = engine
    .rulesOf(subject.id, domains)
    .filter((rule) => rule.effect === 'allow' && rule.obj === obj && rule.act === act)
    .map((rule) => ({ rule: [subject.id, rule.domain, obj, act, 'allow'], at: engine.overrideExpiresAt(subject.id, rule.domain, obj, act) }))
    .filter((row): row is { rule: string[]; at: number } => row.at !== null)
    .sort((a, b) => a.at - b.at)
  const gone: RuleChange[] = [...earlier]
  for (const { rule, at } of expiring) {
    gone.push({ op: 'remove', rule })
    if (!engine.decideAfter(subject, domain, obj, act, gone)) return at
  }
  return null
}

/** The user's override of the pair in `domain` as memory holds it, or null. */
export function currentOverride(engine: PermissionEngine, userId: string, domain: string, obj: string, act: string): OverrideTerm | null {
  const effect = (['allow', 'deny'] as const).find((eft) => engine.policy.hasPolicy([userId, domain, obj, act, eft]) === true)
  return effect === undefined ? null : { effect, expiresAt: engine.overrideExpiresAt(userId, domain, obj, act) }
}

/** The decision with `earlier` laid over the policy; the live decision when there is nothing to lay. */
function decidesAfter(engine: PermissionEngine, subject: Subject, domain: string, obj: string, act: string, earlier: readonly RuleChange[]): boolean {
  return earlier.length === 0 ? engine.decide(subject, domain, obj, act) : engine.decideAfter(subject, domain, obj, act, earlier)
}

/**
 * What the grant rules need to know about the caller and the pair in the
 * target domain. `earlier`: the rows a list's earlier changes add and remove,
 * so a change after them is judged as if they had been written (a caller that
 * revoked its own role's pair earlier in the list no longer holds it).
 */
export function callerStanding(
  ctx: Pick<CommandContext, 'engine'>,
  caller: Caller,
  domain: string,
  input: PairInput,
  earlier: readonly RuleChange[] = [],
): Omit<GrantCheck, 'targetIsRoot' | 'targetIsMerchantUser' | 'targetRole' | 'expiresAt'> {
  return {
    active: ctx.engine.isActive(input.obj, input.act),
    scope: ctx.engine.catalogEntry(input.obj, input.act)?.scope ?? 'any',
    callerIsRoot: isRootAccount(ctx.engine, caller.account),
    callerHolds: decidesAfter(ctx.engine, caller.account, domain, input.obj, input.act, earlier),
    callerHoldsUntil: holdsUntil(ctx.engine, caller.account, domain, input.obj, input.act, earlier),
    obj: input.obj,
    act: input.act,
    domain,
  }
}
