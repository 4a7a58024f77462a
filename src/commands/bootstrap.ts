import { randomBytes } from 'node:crypto'
import { SYSTEM_ACTOR, registerEntry } from '../domain/audit.js'
import type { Account } from '../domain/principals.js'
import { ROOT_SUB_ROLE } from '../domain/root.js'
import { countAccounts, systemSuperAdminExists } from '../storage/accounts.js'
import { accountCreated, writeAccount } from './accountRows.js'
import type { CommandContext } from './context.js'

export interface BootstrapInput {
  email: string
  password: string
  name?: string | undefined
  /** The password was made up here, not chosen by the operator: its owner is asked to change it. */
  generated?: boolean
}

export type BootstrapResult = { created: true; account: Account } | { created: false }

/** Creates the system-owner `super_admin` unless one exists (idempotent, safe to run at every start). */
export async function bootstrapSystemOwner(ctx: CommandContext, input: BootstrapInput): Promise<BootstrapResult> {
  if (await systemSuperAdminExists(ctx.db)) return { created: false }
  const passwordHash = await ctx.passwords.hash(input.password)
  const outcome = await ctx.writes.run(async (tx) => {
    // Re-checked under the revision lock's transaction: two starts at once create one account.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext(current_schema() || \':bootstrap\'))')
    if (await systemSuperAdminExists(tx)) {
      return { changed: false, audit: [], changes: [], result: null }
    }
    const { account, changes } = await writeAccount(tx, {
      email: input.email,
      password_hash: passwordHash,
      name: input.name ?? 'System owner',
      phone: null,
      principal_type: 'system_owner',
      merchant_id: null,
      sub_role_code: ROOT_SUB_ROLE,
      parent_role: null,
      created_by: null,
      must_change_password: input.generated === true,
    })
    return accountCreated(account, changes, registerEntry(account, SYSTEM_ACTOR))
  })
  return outcome.result === null ? { created: false } : { created: true, account: outcome.result }
}

/**
 * First start on an empty embedded store with no bootstrap settings: creates
 * `admin@example.com` with a random password, which the caller prints once;
 * the account is marked to change it at its first sign-in.
 */
export async function createFirstAdmin(ctx: CommandContext): Promise<{ email: string; password: string } | null> {
  if ((await countAccounts(ctx.db)) > 0) return null
  const credentials = { email: 'admin@example.com', password: randomBytes(12).toString('base64url') }
  const result = await bootstrapSystemOwner(ctx, { ...credentials, generated: true })
  return result.created ? credentials : null
}
