import t from 'tap'
import { bootstrapSystemOwner } from '../../src/commands/bootstrap.js'
import { buildTestApp } from '../helper.js'

t.test('bootstrap is idempotent, also when two run at once', async (t) => {
  const ta = await buildTestApp(t)
  const results = await Promise.all([
    bootstrapSystemOwner(ta.service, { email: 'second@example.com', password: 'second-pass-1' }),
    bootstrapSystemOwner(ta.service, { email: 'third@example.com', password: 'third-pass-1' }),
  ])
  t.same(results, [{ created: false }, { created: false }], 'the helper already bootstrapped the system owner')
  const rows = await ta.service.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM admin_accounts WHERE merchant_id IS NULL AND sub_role_code = 'super_admin'",
  )
  t.equal(rows.rows[0]?.n, 1)
})
