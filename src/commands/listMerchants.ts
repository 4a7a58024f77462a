import { ServiceError } from '../domain/errors.js'
import { listMerchants as listStoredMerchants, type MerchantSummary } from '../storage/merchants.js'
import type { Caller, CommandContext } from './context.js'
import { DEFAULT_PAGE_SIZE } from './getAuditLog.js'

export interface MerchantQuery {
  q?: string | undefined
  page?: number | undefined
  page_size?: number | undefined
}

export interface MerchantPage {
  items: MerchantSummary[]
  page: number
  page_size: number
  total: number
}

/** list-merchants: by id (`q`: an id prefix or part of the display name), for platform staff only (a merchant admin never learns other merchants' ids). */
export async function listMerchants(ctx: Pick<CommandContext, 'db'>, caller: Caller, query: MerchantQuery): Promise<MerchantPage> {
  if (caller.account.principal_type !== 'system_owner') throw new ServiceError('PRINCIPAL_TYPE_DENIED', { principal_type: caller.account.principal_type })
  const page = query.page ?? 1
  const pageSize = query.page_size ?? DEFAULT_PAGE_SIZE
  const { items, total } = await listStoredMerchants(ctx.db, query.q, page, pageSize)
  return { items, page, page_size: pageSize, total }
}
