import type { Account } from '../../src/domain/principals.js'
import type { TestApp } from '../helper.js'

/** A role command (grant or revoke) as its route takes it, by root unless `token` says otherwise. */
export const roleCommand = (ta: TestApp, verb: 'grant' | 'revoke', role: string, data: Record<string, unknown>, token = ta.rootToken) =>
  ta.call({
    method: verb === 'grant' ? 'POST' : 'DELETE',
    url: `/v2/admin/permissions/roles/${role}/${verb}`,
    token,
    body: { command: `${verb}-role-permission`, data },
  })

/** A user override command (grant, deny or revoke) as its route takes it, by root unless `token` says otherwise. */
export const userCommand = (ta: TestApp, verb: 'grant' | 'deny' | 'revoke', user: Pick<Account, 'id'>, data: Record<string, unknown>, token = ta.rootToken) =>
  ta.call({
    method: verb === 'revoke' ? 'DELETE' : 'POST',
    url: `/v2/admin/permissions/users/${user.id}/${verb}`,
    token,
    body: { command: `${verb}-user-permission`, data },
  })
