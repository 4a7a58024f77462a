import { ServiceError } from '../domain/errors.js'
import { GLOBAL_DOMAIN } from '../domain/principals.js'
import type { GrantCheck } from '../domain/grantRules.js'
import type { Queryable } from '../storage/db.js'
import type { Caller, CommandContext } from './context.js'
import { merchantExists } from '../storage/merchants.js'

/** A domain is `global` or the id of a merchant that exists; anything else is answered 404. */
export async function assertDomainExists(db: Queryable, domain: string): Promise<void> {
  if (domain === GLOBAL_DOMAIN) return
  if (!(await merchantExists(db, domain))) throw new ServiceError('MERCHANT_NOT_FOUND', { merchant_id: domain })
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

/** What the grant rules need to know about the caller and the pair in the target domain. */
export function callerStanding(
  ctx: Pick<CommandContext, 'engine'>,
  caller: Caller,
  domain: string,
  input: PairInput,
): Omit<GrantCheck, 'targetIsRoot' | 'targetRole'> {
  return {
    active: ctx.engine.isActive(input.obj, input.act),
    callerIsRoot: ctx.engine.isRootRole(caller.account.sub_role_code),
    callerHolds: ctx.engine.decide(caller.account, domain, input.obj, input.act),
    obj: input.obj,
    act: input.act,
    domain,
  }
}
