import type { Queryable } from '../../src/storage/db.js'
import { grantRolePermission } from '../../src/commands/changeRolePermission.js'
import { onboard, type TestApp } from '../helper.js'

/** Everything an import may write. */
export async function fingerprint(db: Queryable): Promise<unknown> {
  const rows = async (sql: string) => (await db.query(sql)).rows
  return {
    rules: await rows('SELECT ptype, v0, v1, v2, v3, v4 FROM casbin_rule ORDER BY 1, 2, 3, 4, 5, 6'),
    overrides: await rows('SELECT user_id::text AS user_id, domain, obj, act, effect, expires_at FROM permission_overrides ORDER BY 1, 2, 3, 4'),
    audit: await rows('SELECT count(*)::int AS n FROM permission_audit'),
    revision: await rows('SELECT revision::text AS revision FROM store_revision'),
  }
}

/** Two merchants, m-1 and m-2, with eight role rules each and one in global. */
export async function twoMerchants(ta: TestApp): Promise<void> {
  await onboard(ta, 'm-1')
  await onboard(ta, 'm-2')
  const root = { account: ta.root, ip: null }
  const pairs = [
    ['orders', 'read'],
    ['orders', 'refund'],
    ['orders', 'cancel'],
    ['payouts', 'read'],
    ['payouts', 'approve'],
    ['products', 'write'],
    ['reports', 'read'],
    ['settings', 'manage'],
  ] as const
  for (const domain of ['m-1', 'm-2']) for (const [obj, act] of pairs) await grantRolePermission(ta.service, root, 'clerk', { obj, act, domain })
  await grantRolePermission(ta.service, root, 'ops', { obj: 'orders', act: 'read', domain: 'global' })
}

