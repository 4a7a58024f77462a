/**
 * The permission catalog as the code declares it: the permissions routes
 * require, and the rest of the platform's. Start-up brings the stored catalog
 * in line with this file (see domain/catalogSync.ts).
 */
export interface PermissionDeclaration {
  obj: string
  act: string
  label: string
  group: string
  /** Declared `platform` when only system-owner users can ever use the pair; `any` otherwise (the default). */
  scope?: CatalogScope
}

/**
 * `platform`: a pair only system-owner users can ever use (the routes that
 * require it refuse merchant callers), so no merchant user ever holds it and
 * it is never granted, denied or overridden in a merchant domain. `any`: the rest.
 */
export type CatalogScope = 'platform' | 'any'

export const routePermissions = {
  adminRegister: { obj: 'admin', act: 'register', label: 'Register administrators', group: 'Administrators' },
  merchantOnboard: { obj: 'merchant', act: 'onboard', label: 'Onboard merchants', group: 'Merchants', scope: 'platform' },
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

const platformPairs = new Set(declaredCatalog().filter((p) => p.scope === 'platform').map(permissionName))

/** The scope the code declares for a pair; a pair it no longer declares is `any` (it is inactive, so nobody holds it). */
export function scopeOf(pair: { obj: string; act: string }): CatalogScope {
  return platformPairs.has(permissionName(pair)) ? 'platform' : 'any'
}

/** A stored catalog entry, as the API shows it. */
export interface CatalogEntry {
  obj: string
  act: string
  label: string
  group_name: string
  is_active: boolean
  scope: CatalogScope
}
