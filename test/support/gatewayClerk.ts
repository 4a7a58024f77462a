/**
 * The gateway tests' usual world: m1's owner and a clerk holding
 * orders:read in m1, the clerk's Authorization header, and the app
 * listening on a free port (so the fast path answers what it recognises).
 */
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { onboard, register, type TestApp } from '../helper.js'

export async function listeningWithClerk(t: Test, ta: TestApp) {
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' }, ta.tokenFor(owner))
  const grant = await ta.call({ method: 'POST', url: '/v2/admin/permissions/roles/clerk/grant', body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } } })
  t.equal(grant.statusCode, 200)
  const authorization = `Bearer ${ta.tokenFor(clerk)}`
  await ta.app.listen({ host: '127.0.0.1', port: 0 })
  return { owner, clerk, authorization, base: `http://127.0.0.1:${(ta.app.server.address() as AddressInfo).port}` }
}
