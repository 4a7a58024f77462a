import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { listPermissionHolders } from '../../commands/accessReview.js'
import type { CommandContext } from '../../commands/context.js'
import { grantRolePermission, revokeRolePermission } from '../../commands/changeRolePermission.js'
import { getAuditLog } from '../../commands/getAuditLog.js'
import { getCatalog, getRolePermissions, getUserPermissions } from '../../commands/permissionQueries.js'
import { revokeUserPermission, setUserPermission } from '../../commands/userOverrides.js'
import { applyPermissionChanges } from '../../commands/applyPermissionChanges.js'
import { BULK_ROUTE_PERMISSIONS, MAX_CHANGES_PER_CALL } from '../../domain/permissionChanges.js'
import { JSON_BODY_BOUNDS } from '../jsonBody.js'
import { routePermissions } from '../../domain/permissions.js'
import { success } from '../envelope.js'
import { localisedPermissions } from '../../i18n/index.js'
import { callerOf } from '../plugins/authentication.js'
import { Domain, Lang, ReadQuery, SubRoleCode, UserId, bearer, responses } from '../../schemas/common.js'
import {
  AppliedChangesData,
  applyChangesCommand,
  AuditItem,
  AuditQuery,
  CatalogItem,
  HoldersData,
  HoldersQuery,
  RoleChangeData,
  RolePermissionsData,
  UserChangeData,
  UserPermissionsData,
  overrideCommand,
  pairCommand,
} from '../../schemas/permissions.js'

const RoleParams = Type.Object({ subRoleCode: SubRoleCode })
const UserParams = Type.Object({ userId: UserId })
const LangQuery = Type.Object({ lang: Lang })
const DomainQuery = ReadQuery({ domain: Type.Optional(Domain) })
/** A full list: each change is an object of at most seven members (eight values), besides the envelope. */
const BULK_BODY_BOUNDS = { ...JSON_BODY_BOUNDS, maxValues: JSON_BODY_BOUNDS.maxValues + 9 * MAX_CHANGES_PER_CALL }

export const permissionRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  const roleCommand = (name: string) => ({
    tags: ['permissions'],
    security: bearer,
    params: RoleParams,
    querystring: LangQuery,
    body: pairCommand(name),
    response: responses(200, RoleChangeData, [404, 413, 415]),
  })
  const userCommand = (name: string, body = pairCommand(name)) => ({
    tags: ['permissions'],
    security: bearer,
    params: UserParams,
    querystring: LangQuery,
    body,
    response: responses(200, UserChangeData, [404, 413, 415]),
  })

  app.post(
    '/v2/admin/permissions/roles/:subRoleCode/grant',
    { config: { permission: routePermissions.permissionAssign }, schema: roleCommand('grant-role-permission') },
    async (request) => success(await grantRolePermission(ctx, callerOf(request), request.params.subRoleCode, request.body.data)),
  )
  app.delete(
    '/v2/admin/permissions/roles/:subRoleCode/revoke',
    { config: { permission: routePermissions.permissionRevoke }, schema: roleCommand('revoke-role-permission') },
    async (request) => success(await revokeRolePermission(ctx, callerOf(request), request.params.subRoleCode, request.body.data)),
  )
  app.post(
    '/v2/admin/permissions/users/:userId/grant',
    { config: { permission: routePermissions.permissionAssign }, schema: userCommand('grant-user-permission', overrideCommand('grant-user-permission')) },
    async (request) => success(await setUserPermission(ctx, callerOf(request), request.params.userId, request.body.data, 'allow')),
  )
  app.post(
    '/v2/admin/permissions/users/:userId/deny',
    { config: { permission: routePermissions.permissionAssign }, schema: userCommand('deny-user-permission', overrideCommand('deny-user-permission')) },
    async (request) => success(await setUserPermission(ctx, callerOf(request), request.params.userId, request.body.data, 'deny')),
  )
  app.delete(
    '/v2/admin/permissions/users/:userId/revoke',
    { config: { permission: routePermissions.permissionRevoke }, schema: userCommand('revoke-user-permission') },
    async (request) => success(await revokeUserPermission(ctx, callerOf(request), request.params.userId, request.body.data)),
  )

  app.post(
    '/v2/admin/permissions/changes',
    {
      // The body says which permissions the call needs (each kind's own route's): one of them lets it past the guard.
      config: { anyPermission: BULK_ROUTE_PERMISSIONS, bodyBounds: BULK_BODY_BOUNDS },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: LangQuery,
        body: applyChangesCommand,
        response: responses(200, AppliedChangesData, [404, 413, 415]),
      },
    },
    async (request) => success(await applyPermissionChanges(ctx, callerOf(request), request.body.data)),
  )

  app.get(
    '/v2/admin/permissions/catalog',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: ReadQuery(),
        response: responses(200, Type.Object({ items: Type.Array(CatalogItem) })),
      },
    },
    async (request) => success({ items: getCatalog(ctx.engine).map((e) => app.localizer.localiseCatalogEntry(request.locale, e)) }),
  )
  app.get(
    '/v2/admin/permissions/roles/:subRoleCode',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['permissions'],
        security: bearer,
        params: RoleParams,
        querystring: DomainQuery,
        response: responses(200, RolePermissionsData, [404]),
      },
    },
    async (request) =>
      success(localisedPermissions(app.localizer, request.locale, await getRolePermissions(ctx, callerOf(request), request.params.subRoleCode, request.query.domain))),
  )
  app.get(
    '/v2/admin/permissions/users/:userId',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['permissions'],
        security: bearer,
        params: UserParams,
        querystring: DomainQuery,
        response: responses(200, UserPermissionsData, [404]),
      },
    },
    async (request) =>
      success(localisedPermissions(app.localizer, request.locale, await getUserPermissions(ctx, callerOf(request), request.params.userId, request.query.domain))),
  )

  app.get(
    '/v2/admin/permissions/holders',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: HoldersQuery,
        response: responses(200, HoldersData, [404]),
      },
    },
    async (request) => success(await listPermissionHolders(ctx, callerOf(request), request.query)),
  )

  app.get(
    '/v2/admin/permissions/audit-log',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['permissions'],
        security: bearer,
        querystring: AuditQuery,
        response: responses(
          200,
          Type.Object({ items: Type.Array(AuditItem), page: Type.Integer(), page_size: Type.Integer(), total: Type.Integer() }),
        ),
      },
    },
    async (request) => success(await getAuditLog(ctx, callerOf(request), request.query)),
  )
}
