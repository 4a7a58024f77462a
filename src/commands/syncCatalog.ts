import { SYSTEM_ACTOR } from '../domain/audit.js'
import type { StoreChange } from '../domain/changes.js'
import { planCatalogSync, type PermissionDeclaration } from '../domain/permissions.js'
import { applyChange } from '../engine/applyChange.js'
import { insertCatalogEntry, listCatalog, updateCatalogEntry } from '../storage/catalog.js'
import type { CommandContext } from './context.js'

/**
 * Brings the stored catalog in line with the declared one in one transaction
 * under an advisory lock, so replicas starting together record each event once.
 */
export async function syncCatalog(
  ctx: Pick<CommandContext, 'writes' | 'engine' | 'accounts'>,
  declared: readonly PermissionDeclaration[],
): Promise<{ events: number; revision: number }> {
  const outcome = await ctx.writes.run(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':catalog'))")
    const stored = await listCatalog(tx)
    const plan = planCatalogSync(stored, declared)
    const known = new Set(stored.map((e) => `${e.obj}:${e.act}`))
    for (const entry of plan.touched) {
      if (known.has(`${entry.obj}:${entry.act}`)) await updateCatalogEntry(tx, entry)
    }
    for (const { event, entry } of plan.events) {
      if (event === 'catalog_added') await insertCatalogEntry(tx, entry)
    }
    const change: StoreChange = { kind: 'catalog', entries: plan.next }
    return {
      changed: plan.events.length > 0,
      audit: plan.events.map(({ event, entry }) => ({
        action: event,
        target_type: 'permission' as const,
        target_id: `${entry.obj}:${entry.act}`,
        obj: entry.obj,
        act: entry.act,
        domain: null,
        merchant_id: null,
        actor: SYSTEM_ACTOR,
      })),
      changes: [change],
      // Labels and groups may change without an event (nothing audited, no revision): this process still shows them.
      afterCommit: () => applyChange(ctx, change),
      result: plan.events.length,
    }
  })
  return { events: outcome.result, revision: outcome.revision }
}
