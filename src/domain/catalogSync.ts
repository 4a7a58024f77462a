import { permissionName, type CatalogEntry, type PermissionDeclaration } from './permissions.js'

export type CatalogEvent = 'catalog_added' | 'catalog_deactivated' | 'catalog_reactivated'

/** What start-up writes to bring the stored catalog in line with the declared one. */
export interface CatalogSyncPlan {
  /** The whole catalog afterwards, as memory holds it: the declared pairs, then the vanished ones inactive. */
  next: CatalogEntry[]
  /** What is audited, one entry each. */
  events: Array<{ event: CatalogEvent; entry: CatalogEntry }>
  /** Rows to insert: pairs declared and not stored. */
  inserted: CatalogEntry[]
  /** Rows to update: stored pairs whose label, group or activity changes (a label or group alone is not an event). */
  updated: CatalogEntry[]
}

/**
 * How the stored catalog must change to match the declared one: new pairs
 * added, vanished ones deactivated (never deleted), returning ones
 * reactivated; labels and groups follow the code without an event.
 */
export function planCatalogSync(stored: readonly CatalogEntry[], declared: readonly PermissionDeclaration[]): CatalogSyncPlan {
  const byKey = new Map(stored.map((e) => [permissionName(e), e]))
  const declaredKeys = new Set(declared.map(permissionName))
  const plan: CatalogSyncPlan = { next: [], events: [], inserted: [], updated: [] }
  for (const d of declared) {
    const current = byKey.get(permissionName(d))
    const entry: CatalogEntry = { obj: d.obj, act: d.act, label: d.label, group_name: d.group, is_active: true, scope: d.scope ?? 'any' }
    plan.next.push(entry)
    if (current === undefined) {
      plan.events.push({ event: 'catalog_added', entry })
      plan.inserted.push(entry)
      continue
    }
    if (!current.is_active) plan.events.push({ event: 'catalog_reactivated', entry })
    if (current.label !== entry.label || current.group_name !== entry.group_name || !current.is_active) plan.updated.push(entry)
  }
  for (const current of stored) {
    if (declaredKeys.has(permissionName(current))) continue
    const entry = { ...current, is_active: false }
    plan.next.push(entry)
    if (current.is_active) {
      plan.events.push({ event: 'catalog_deactivated', entry })
      plan.updated.push(entry)
    }
  }
  return plan
}
