import { registerEntry } from '../domain/audit.js'
import { ServiceError } from '../domain/errors.js'
import { assertMayAssignSubRole } from '../domain/grantRules.js'
import { homeDomain, type Account } from '../domain/principals.js'
import { placeNewAdmin } from '../domain/registration.js'
import { emailTaken } from '../storage/accounts.js'
import { merchantExists } from '../storage/merchants.js'
import { accountCreated, writeAccount } from './accountRows.js'
import { beyondCaller } from './accountLifecycle.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { assertSubRoleKnown } from './subRoles.js'
import { isRootAccount } from '../domain/root.js'

export interface RegisterAdminInput {
  email: string
  password: string
  name: string
  phone?: string | undefined
  sub_role_code: string
  merchant_id?: string | undefined
}

export async function registerAdmin(ctx: CommandContext, caller: Caller, input: RegisterAdminInput): Promise<Account & { revision: number }> {
  const placement = placeNewAdmin(caller.account, input, ctx.engine)
  const home = homeDomain(placement)
  assertMayAssignSubRole({
    callerIsRoot: isRootAccount(ctx.engine, caller.account),
    beyondCaller: beyondCaller(ctx, caller, input.sub_role_code, home),
    domain: home,
  })
  if (placement.merchant_id !== null && !(await merchantExists(ctx.db, placement.merchant_id))) {
    throw new ServiceError('MERCHANT_NOT_FOUND', { merchant_id: placement.merchant_id })
  }
  await assertSubRoleKnown(ctx, home, input.sub_role_code)
  if (await emailTaken(ctx.db, input.email)) throw new ServiceError('EMAIL_TAKEN')
  const passwordHash = await ctx.passwords.hash(input.password)
  const outcome = await ctx.writes.run(async (tx) => {
    const { account, changes } = await writeAccount(tx, {
      email: input.email,
      password_hash: passwordHash,
      name: input.name,
      phone: input.phone ?? null,
      ...placement,
      sub_role_code: input.sub_role_code,
      created_by: caller.account.id,
    })
    return accountCreated(account, changes, registerEntry(account, actorOf(caller)))
  })
  return { ...outcome.result, revision: outcome.revision }
}
