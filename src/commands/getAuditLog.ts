import { accountNames, findAccountByEmail, type AccountName } from '../storage/accounts.js'
import type { AuditItem } from '../storage/audit.js'
import { listAudit } from '../storage/audit.js'
import type { Caller, CommandContext } from './context.js'

export interface AuditQuery {
  target_type?: 'role' | 'user' | 'permission' | undefined
  target_id?: string | undefined
  action?: string | undefined
  /** The actor's account id or e-mail. */
  actor?: string | undefined
  /** A user target's account id or e-mail (`target_id` names any target by its id). */
  target?: string | undefined
  /** RFC 3339: entries at or after it. */
  from?: string | undefined
  /** RFC 3339: entries before it. */
  until?: string | undefined
  page?: number | undefined
  page_size?: number | undefined
}

/** An entry with its actor and (user) target named, where the caller may see who they are. */
export interface NamedAuditItem extends AuditItem {
  actor_email: string | null
  actor_name: string | null
  target_email: string | null
  target_name: string | null
}

export interface AuditPage {
  items: NamedAuditItem[]
  page: number
  page_size: number
  total: number
}

export const DEFAULT_PAGE_SIZE = 20

/**
 * get-permission-audit: filters combine with AND, newest first; merchant
 * callers see their merchant only. Actors and user targets come with their
 * e-mail and name when the caller's tenant holds them (a merchant never
 * learns who platform staff or another merchant's people are); an e-mail in
 * the actor or target filter that names nobody the caller may see finds
 * nothing, as an unknown one does.
 */
export async function getAuditLog(ctx: Pick<CommandContext, 'db'>, caller: Caller, query: AuditQuery): Promise<AuditPage> {
  const page = query.page ?? 1
  const pageSize = query.page_size ?? DEFAULT_PAGE_SIZE
  const merchant = caller.account.principal_type === 'merchant' ? (caller.account.merchant_id ?? undefined) : undefined
  const visible = (account: Pick<AccountName, 'merchant_id'>) => merchant === undefined || account.merchant_id === merchant
  const [actorId, targetId] = await Promise.all([query.actor, query.target].map((named) => accountIdOf(ctx, named, visible)))
  if (actorId === null || targetId === null) return { items: [], page, page_size: pageSize, total: 0 }
  const { items, total } = await listAudit(
    ctx.db,
    {
      target_type: targetId === undefined ? query.target_type : 'user',
      target_id: targetId ?? query.target_id,
      action: query.action,
      merchant_id: merchant,
      actor_id: actorId,
      from: query.from === undefined ? undefined : new Date(query.from),
      until: query.until === undefined ? undefined : new Date(query.until),
    },
    page,
    pageSize,
  )
  const names = new Map(
    (await accountNames(ctx.db, items.flatMap((item) => (item.target_type === 'user' ? [item.actor_id, item.target_id] : [item.actor_id]))))
      .filter(visible)
      .map((account) => [account.id, account]),
  )
  const named = items.map((item) => {
    const actor = names.get(item.actor_id)
    const target = item.target_type === 'user' ? names.get(item.target_id) : undefined
    // A merchant sees who acted on its tenant, not where platform staff work from.
    const ip = merchant === undefined || item.actor_type === 'merchant' ? item.ip : null
    return { ...item, ip, actor_email: actor?.email ?? null, actor_name: actor?.name ?? null, target_email: target?.email ?? null, target_name: target?.name ?? null }
  })
  return { items: named, page, page_size: pageSize, total }
}

/** An account named by id or e-mail as the filter's id: undefined when not asked, null when it names nobody the caller may see. */
async function accountIdOf(
  ctx: Pick<CommandContext, 'db'>,
  named: string | undefined,
  visible: (account: Pick<AccountName, 'merchant_id'>) => boolean,
): Promise<string | null | undefined> {
  if (named === undefined) return undefined
  if (!named.includes('@')) return named
  const account = await findAccountByEmail(ctx.db, named)
  return account !== null && visible(account) ? account.id : null
}
