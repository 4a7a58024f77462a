import { ServiceError } from '../domain/errors.js'
import { isReservedMerchantId } from '../domain/identifiers.js'
import type { Account } from '../domain/principals.js'
import { ROOT_SUB_ROLE } from '../domain/root.js'
import { emailTaken } from '../storage/accounts.js'
import { insertMerchant, merchantExists } from '../storage/merchants.js'
import { accountCreated, writeAccount } from './accountRows.js'
import type { CommandContext } from './context.js'
import { onboardEntry, type Actor } from '../domain/audit.js'

export interface OnboardMerchantInput {
  merchant_id: string
  email: string
  password: string
  name: string
  phone?: string | undefined
  /** The merchant's name for people; its id when absent. */
  display_name?: string | undefined
}

/** Creates a merchant and its `super_admin`: a merchant exists once its super_admin does. */
export async function onboardMerchant(ctx: CommandContext, actor: Actor, input: OnboardMerchantInput): Promise<Account & { revision: number }> {
  if (actor.type !== 'system_owner' && actor.type !== 'system') throw new ServiceError('PRINCIPAL_TYPE_DENIED')
  if (isReservedMerchantId(input.merchant_id)) {
    throw new ServiceError('VALIDATION_FAILED', {}, [{ field: 'merchant_id', message: 'reserved' }])
  }
  if (await merchantExists(ctx.db, input.merchant_id)) throw new ServiceError('MERCHANT_EXISTS')
  if (await emailTaken(ctx.db, input.email)) throw new ServiceError('EMAIL_TAKEN')
  const passwordHash = await ctx.passwords.hash(input.password)
  const outcome = await ctx.writes.run(async (tx) => {
    if (!(await insertMerchant(tx, input.merchant_id, input.display_name ?? input.merchant_id))) throw new ServiceError('MERCHANT_EXISTS')
    const { account, changes: accountChanges } = await writeAccount(tx, {
      email: input.email,
      password_hash: passwordHash,
      name: input.name,
      phone: input.phone ?? null,
      principal_type: 'merchant',
      merchant_id: input.merchant_id,
      sub_role_code: ROOT_SUB_ROLE,
      parent_role: 'system_owner',
      created_by: actor.type === 'system' ? null : actor.id,
    })
    return accountCreated(account, [{ kind: 'merchant', id: input.merchant_id }, ...accountChanges], onboardEntry(account, actor))
  })
  return { ...outcome.result, revision: outcome.revision }
}
