import t from 'tap'
import { buildService } from '../../src/compose.js'
import { grantRolePermission } from '../../src/commands/changeRolePermission.js'
import { login } from '../../src/commands/login.js'
import { loginLimits } from '../../src/domain/loginLimits.js'
import { insertDecisionEvents, listDecisionEvents, maintainDecisionPartitions } from '../../src/storage/decisionEvents.js'
import { migrate } from '../../src/storage/migrate.js'
import { openPostgres } from '../../src/storage/pg.js'
import { ROOT_EMAIL, ROOT_PASSWORD, backend, freshDatabase, postgresUrl, testConfig } from '../helper.js'
import { readmeServiceRole } from '../support/serviceRole.js'

t.test('the service runs as a role that may only insert and read audit rows', async (t) => {
  if (backend !== 'postgres' || postgresUrl === undefined) {
    // PGlite has a single superuser: the append-only trigger is what protects rows there (test/commands/verifyAudit.test.ts).
    t.equal(backend, 'pglite')
    return
  }
  const db = await freshDatabase(t)
  await migrate(db)
  const schema = db.schema as string
  const { role, password } = await readmeServiceRole(t, db, schema, postgresUrl)
  const url = new URL(postgresUrl)
  url.username = role
  url.password = password
  const limited = openPostgres({ url: url.toString(), schema })
  t.teardown(() => limited.close())

  const service = await buildService(testConfig({ DATABASE_URL: url.toString() }), { db: limited, skipFirstAdmin: true })
  t.teardown(() => service.close())
  const root = await service.db.query<{ id: string }>("SELECT id::text AS id FROM admin_accounts WHERE sub_role_code = 'super_admin'")
  const account = await service.accounts.get(root.rows[0]?.id ?? '')
  t.ok(account, 'bootstrap and catalog sync worked with the limited role')
  const change = await grantRolePermission(service, { account: account!, ip: null }, 'clerk', { obj: 'orders', act: 'read' })
  t.equal(change.changed, true, 'grants write their audit rows')
  const loginContext = { db: service.db, passwords: service.passwords, tokens: service.tokens, limits: loginLimits(10) }
  await t.rejects(login(loginContext, ROOT_EMAIL, 'wrong-password', '192.0.2.1'), { code: 'BAD_CREDENTIALS' }, 'a failed login is counted')
  t.ok((await login(loginContext, ROOT_EMAIL, ROOT_PASSWORD, '192.0.2.1')).token.access_token, 'a login records its network')
  await t.rejects(limited.query("UPDATE permission_audit SET ip = 'x'"), { code: '42501' }, 'UPDATE is not granted')
  await t.rejects(limited.query('DELETE FROM permission_audit'), { code: '42501' }, 'DELETE is not granted')
  await t.rejects(limited.query('TRUNCATE permission_audit'), { code: '42501' })

  // Decision events: written and read through the table, days made and dropped by the owner's function.
  const event = {
    decision_id: 'd-service-role',
    time: '2030-05-02T08:00:00.000000Z',
    subject: { user_id: account!.id, merchant_id: null },
    domain: 'global',
    obj: 'orders',
    act: 'read',
    allowed: false,
  }
  await maintainDecisionPartitions(limited, 7, '2030-05-02')
  await insertDecisionEvents(limited, [event])
  t.same((await listDecisionEvents(limited, { user_id: account!.id }, null, 10)).map((d) => d.event), [event], 'the sink writes and the list reads')
  await maintainDecisionPartitions(limited, 7, '2030-05-20')
  t.same(await listDecisionEvents(limited, {}, null, 10), [], 'retention drops the day')
  await t.rejects(limited.query('DELETE FROM decision_events'), { code: '42501' }, 'rows are never deleted one by one')
})
