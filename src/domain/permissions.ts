/**
 * The permission catalog as the code declares it: the permissions routes
 * require, and the rest of the platform's. Start-up brings the stored catalog
 * in line with this file (see commands/syncCatalog.ts).
 */
export interface PermissionDeclaration {
  obj: string
  act: string
  label: string
  group: string
}

export const routePermissions = {
  adminRegister: { obj: 'admin', act: 'register', label: 'Register administrators', group: 'Administrators' },
  merchantOnboard: { obj: 'merchant', act: 'onboard', label: 'Onboard merchants', group: 'Merchants' },
  permissionAssign: { obj: 'permission', act: 'assign', label: 'Grant and deny permissions', group: 'Permissions' },
  permissionRevoke: { obj: 'permission', act: 'revoke', label: 'Revoke permissions', group: 'Permissions' },
  permissionRead: { obj: 'permission', act: 'read', label: 'View permissions and audit trail', group: 'Permissions' },
  adminRead: { obj: 'admin', act: 'read', label: 'View administrators', group: 'Administrators' },
  adminManage: { obj: 'admin', act: 'manage', label: 'Change, deactivate and reactivate administrators', group: 'Administrators' },
} as const satisfies Record<string, PermissionDeclaration>

/** Permissions other services of the platform check through this one. */
export const platformPermissions: readonly PermissionDeclaration[] = [
  { obj: 'orders', act: 'read', label: 'View orders', group: 'Orders' },
  { obj: 'orders', act: 'refund', label: 'Refund orders', group: 'Orders' },
  { obj: 'orders', act: 'cancel', label: 'Cancel orders', group: 'Orders' },
  { obj: 'payouts', act: 'read', label: 'View payouts', group: 'Payouts' },
  { obj: 'payouts', act: 'approve', label: 'Approve payouts', group: 'Payouts' },
  { obj: 'customers', act: 'read', label: 'View customers', group: 'Customers' },
  { obj: 'customers', act: 'export', label: 'Export customer data', group: 'Customers' },
  { obj: 'products', act: 'read', label: 'View products', group: 'Catalogue' },
  { obj: 'products', act: 'write', label: 'Edit products', group: 'Catalogue' },
  { obj: 'reports', act: 'read', label: 'View reports', group: 'Reports' },
  { obj: 'settings', act: 'manage', label: 'Manage settings', group: 'Settings' },
]

export function declaredCatalog(): PermissionDeclaration[] {
  const all = [...Object.values(routePermissions), ...platformPermissions]
  const seen = new Set<string>()
  return all.filter((p) => {
    const key = `${p.obj}:${p.act}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

export const permissionName = (p: { obj: string; act: string }): string => `${p.obj}:${p.act}`

/** A stored catalog entry, as the API shows it. */
export interface CatalogEntry {
  obj: string
  act: string
  label: string
  group_name: string
  is_active: boolean
}

export type CatalogEvent = 'catalog_added' | 'catalog_deactivated' | 'catalog_reactivated'

/**
 * How the stored catalog must change to match the declared one: new pairs
 * added, vanished ones deactivated, returning ones reactivated; labels and
 * groups follow the code without an event.
 */
export function planCatalogSync(
  stored: readonly CatalogEntry[],
  declared: readonly PermissionDeclaration[],
): { next: CatalogEntry[]; events: Array<{ event: CatalogEvent; entry: CatalogEntry }>; touched: CatalogEntry[] } {
  const byKey = new Map(stored.map((e) => [permissionName(e), e]))
  const declaredKeys = new Set(declared.map(permissionName))
  const events: Array<{ event: CatalogEvent; entry: CatalogEntry }> = []
  const touched: CatalogEntry[] = []
  const next: CatalogEntry[] = []
  for (const d of declared) {
    const current = byKey.get(permissionName(d))
    const entry: CatalogEntry = { obj: d.obj, act: d.act, label: d.label, group_name: d.group, is_active: true }
    next.push(entry)
    if (current === undefined) events.push({ event: 'catalog_added', entry })
    else if (!current.is_active) events.push({ event: 'catalog_reactivated', entry })
    if (current !== undefined && (current.label !== entry.label || current.group_name !== entry.group_name || !current.is_active)) {
      touched.push(entry)
    }
  }
  for (const current of stored) {
    if (declaredKeys.has(permissionName(current))) continue
    const entry = { ...current, is_active: false }
    next.push(entry)
    if (current.is_active) {
      events.push({ event: 'catalog_deactivated', entry })
      touched.push(entry)
    }
  }
  return { next, events, touched }
}
