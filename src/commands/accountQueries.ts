import type { Account } from '../domain/principals.js'
import { assertReachable } from '../domain/tenancy.js'
import { listAccounts as listStoredAccounts } from '../storage/accounts.js'
import { allowedActions, type AccountAction } from './accountLifecycle.js'
import type { Caller, CommandContext } from './context.js'
import { DEFAULT_PAGE_SIZE } from './getAuditLog.js'

export interface AccountQuery {
  merchant_id?: string | undefined
  sub_role_code?: string | undefined
  status?: 'active' | 'deactivated' | undefined
  q?: string | undefined
  page?: number | undefined
  page_size?: number | undefined
}

export interface AccountPage {
  items: Array<Account & { allowed_actions: AccountAction[] }>
  page: number
  page_size: number
  total: number
}

/**
 * list-admins: newest first, filters combined with AND; a merchant caller
 * sees its merchant's accounts only. Each row says what the caller may do
 * to it (allowedActions), so a client offers only that.
 */
export async function listAccounts(ctx: Pick<CommandContext, 'db' | 'engine'>, caller: Caller, query: AccountQuery): Promise<AccountPage> {
  const page = query.page ?? 1
  const pageSize = query.page_size ?? DEFAULT_PAGE_SIZE
  const merchant = caller.account.principal_type === 'merchant' ? (caller.account.merchant_id ?? undefined) : query.merchant_id
  const { items, total } = await listStoredAccounts(
    ctx.db,
    { merchant_id: merchant, sub_role_code: query.sub_role_code, status: query.status, q: query.q },
    page,
    pageSize,
  )
  const rows = await Promise.all(items.map(async (account) => ({ ...account, allowed_actions: await allowedActions(ctx, caller, account) })))
  return { items: rows, page, page_size: pageSize, total }
}

/** get-admin: one account, answered 404 outside the caller's tenant exactly as an unknown id. */
export async function getAccount(ctx: Pick<CommandContext, 'accounts'>, caller: Caller, userId: string): Promise<Account> {
  return assertReachable(caller.account, await ctx.accounts.get(userId))
}
