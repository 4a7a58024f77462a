import type { AuditItem } from '../storage/audit.js'
import { listAudit } from '../storage/audit.js'
import type { Caller, CommandContext } from './context.js'

export interface AuditQuery {
  target_type?: 'role' | 'user' | 'permission' | undefined
  target_id?: string | undefined
  action?: string | undefined
  page?: number | undefined
  page_size?: number | undefined
}

export interface AuditPage {
  items: AuditItem[]
  page: number
  page_size: number
  total: number
}

export const DEFAULT_PAGE_SIZE = 20

/** get-permission-audit: filters combine with AND, newest first; merchant callers see their merchant only. */
export async function getAuditLog(ctx: Pick<CommandContext, 'db'>, caller: Caller, query: AuditQuery): Promise<AuditPage> {
  const page = query.page ?? 1
  const pageSize = query.page_size ?? DEFAULT_PAGE_SIZE
  const merchant = caller.account.principal_type === 'merchant' ? (caller.account.merchant_id ?? undefined) : undefined
  const { items, total } = await listAudit(
    ctx.db,
    { target_type: query.target_type, target_id: query.target_id, action: query.action, merchant_id: merchant },
    page,
    pageSize,
  )
  // A merchant sees who acted on its tenant, not where platform staff work from.
  const shown = merchant === undefined ? items : items.map((item) => (item.actor_type === 'merchant' ? item : { ...item, ip: null }))
  return { items: shown, page, page_size: pageSize, total }
}
