import { routePermissions, type PermissionDeclaration } from './permissions.js'

/** The most changes one apply-permission-changes call may carry: the work a call does (checks, rows, preview) is bounded by it. */
export const MAX_CHANGES_PER_CALL = 1000

export const CHANGE_KINDS = ['role_grant', 'role_deny', 'role_revoke', 'user_grant', 'user_deny', 'user_revoke'] as const
export type ChangeKind = (typeof CHANGE_KINDS)[number]

/** What each kind needs of its caller: what the kind's own route needs (a role's deny, which has no route, as a grant). */
export const KIND_PERMISSION: Readonly<Record<ChangeKind, PermissionDeclaration>> = {
  role_grant: routePermissions.permissionAssign,
  role_deny: routePermissions.permissionAssign,
  role_revoke: routePermissions.permissionRevoke,
  user_grant: routePermissions.permissionAssign,
  user_deny: routePermissions.permissionAssign,
  user_revoke: routePermissions.permissionRevoke,
}

/** Any of these lets a caller past the bulk route's guard; the kinds in its list then say which it needs. */
export const BULK_ROUTE_PERMISSIONS: readonly PermissionDeclaration[] = [routePermissions.permissionAssign, routePermissions.permissionRevoke]
