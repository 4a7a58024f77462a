import { catalogEntry } from '../domain/audit.js'
import type { StoreChange } from '../domain/changes.js'
import { planCatalogSync } from '../domain/catalogSync.js'
import type { PermissionDeclaration } from '../domain/permissions.js'
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
    const plan = planCatalogSync(await listCatalog(tx), declared)
    for (const entry of plan.updated) await updateCatalogEntry(tx, entry)
    for (const entry of plan.inserted) await insertCatalogEntry(tx, entry)
    const change: StoreChange = { kind: 'catalog', entries: plan.next }
    return {
      changed: plan.events.length > 0,
      audit: plan.events.map(({ event, entry }) => catalogEntry(event, entry)),
      changes: [change],
      // Labels and groups may change without an event (nothing audited, no revision): this process still shows them.
      afterCommit: () => applyChange(ctx, change),
      result: plan.events.length,
    }
  })
  return { events: outcome.result, revision: outcome.revision }
}
