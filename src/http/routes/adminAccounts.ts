import { Type, type TSchema } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { changeSubRole, setAccountStatus } from '../../commands/accountLifecycle.js'
import { ACCOUNT_ACTIONS, type AccountAction } from '../../commands/accountLifecycle.js'
import { getAccount, listAccounts } from '../../commands/accountQueries.js'
import type { CommandContext } from '../../commands/context.js'
import { routePermissions } from '../../domain/permissions.js'
import { withRootFlag } from '../../domain/root.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { Account, AccountStatusSchema, CommandBody, Lang, MerchantId, Paging, PlainText, ReadQuery, SubRoleCode, UserId, bearer, responses } from '../../schemas/common.js'

const UserParams = Type.Object({ userId: UserId })

const AccountsQuery = ReadQuery({
  merchant_id: Type.Optional(MerchantId),
  sub_role_code: Type.Optional(SubRoleCode),
  status: Type.Optional(AccountStatusSchema),
  q: Type.Optional(PlainText(1, 200)),
  ...Paging,
})

const AccountChangeData = Type.Object({ changed: Type.Boolean(), revision: Type.Integer(), account: Account })

const SubRoleBody = CommandBody(
  'change-sub-role',
  Type.Object({ sub_role_code: SubRoleCode }, { additionalProperties: false }),
  { sub_role_code: 'support_agent' },
)
const statusBody = (command: string) => CommandBody(command, Type.Object({}, { additionalProperties: false }), {})

/** The admin UI's account pages: list, read, move to another sub-role, switch off and on. */
/** An account change's schema: the account in the path, a command body, the changed account back. */
const accountChangeSchema = <Body extends TSchema>(body: Body, errorStatuses: number[]) => ({
  tags: ['accounts'],
  security: bearer,
  params: UserParams,
  querystring: Type.Object({ lang: Lang }),
  body,
  response: responses(200, AccountChangeData, errorStatuses),
})

/** A listed account with what the caller may do to it (the rules of the lifecycle commands, src/commands/accountLifecycle.ts). */
const ListedAccount = Type.Composite([
  Account,
  Type.Object({ allowed_actions: Type.Array(Type.Unsafe<AccountAction>({ type: 'string', enum: [...ACCOUNT_ACTIONS] })) }),
])

export const adminAccountRoutes: FastifyPluginAsyncTypebox<{ ctx: CommandContext }> = async (app, { ctx }) => {
  app.get(
    '/v2/admin/accounts',
    {
      config: { permission: routePermissions.adminRead },
      schema: {
        tags: ['accounts'],
        security: bearer,
        querystring: AccountsQuery,
        response: responses(200, Type.Object({ items: Type.Array(ListedAccount), page: Type.Integer(), page_size: Type.Integer(), total: Type.Integer() })),
      },
    },
    async (request) => {
      const page = await listAccounts(ctx, callerOf(request), request.query)
      return success({ ...page, items: page.items.map((account) => withRootFlag(ctx.engine, account)) })
    },
  )

  app.get(
    '/v2/admin/accounts/:userId',
    {
      config: { permission: routePermissions.adminRead },
      schema: { tags: ['accounts'], security: bearer, params: UserParams, querystring: ReadQuery(), response: responses(200, Account, [404]) },
    },
    async (request) => success(withRootFlag(ctx.engine, await getAccount(ctx, callerOf(request), request.params.userId))),
  )

  app.post(
    '/v2/admin/accounts/:userId/sub-role',
    {
      config: { permission: routePermissions.adminManage },
      schema: accountChangeSchema(SubRoleBody, [404, 413, 415]),
    },
    async (request) => {
      const change = await changeSubRole(ctx, callerOf(request), request.params.userId, request.body.data.sub_role_code)
      return success({ ...change, account: withRootFlag(ctx.engine, change.account) })
    },
  )

  for (const [path, command, status] of [
    ['deactivate', 'deactivate-admin', 'deactivated'],
    ['reactivate', 'reactivate-admin', 'active'],
  ] as const) {
    app.post(
      `/v2/admin/accounts/:userId/${path}`,
      {
        config: { permission: routePermissions.adminManage },
        schema: accountChangeSchema(statusBody(command), [404, 409, 413, 415]),
      },
      async (request) => {
        const change = await setAccountStatus(ctx, callerOf(request), request.params.userId, status)
        return success({ ...change, account: withRootFlag(ctx.engine, change.account) })
      },
    )
  }
}
