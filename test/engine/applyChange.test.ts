import t from 'tap'
import { applyChange } from '../../src/engine/applyChange.js'
import { buildTestService } from '../helper.js'

t.test('a sub-role change moves the root flag only for global sub-roles', async (t) => {
  const service = await buildTestService(t)
  const memory = { engine: service.engine, accounts: service.accounts }
  t.ok(service.engine.isRootRole('super_admin'))
  await applyChange(memory, { kind: 'sub_role', code: 'super_admin', domain: 'm1', label: 'Boss', is_root: false })
  t.ok(service.engine.isRootRole('super_admin'), "a merchant's sub-role of a root code leaves the template root")
  await applyChange(memory, { kind: 'sub_role', code: 'owner', is_root: true })
  t.ok(service.engine.isRootRole('owner'), 'a change without a domain (written before sub-roles had one) is global')
  await applyChange(memory, { kind: 'sub_role', code: 'owner', domain: 'global', is_root: false })
  t.notOk(service.engine.isRootRole('owner'), 'a global one sets it')
})
