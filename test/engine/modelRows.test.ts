import { readFileSync } from 'node:fs'
import { newEnforcer, newModelFromString } from 'casbin'
import t from 'tap'
import { PermissionEngine } from '../../src/engine/engine.js'
import { removeRows } from '../../src/engine/modelRows.js'
import { migrate } from '../../src/storage/migrate.js'
import { freshDatabase } from '../helper.js'

const modelText = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
const catalog = [{ obj: 'orders', act: 'read', label: 'Read orders', group_name: 'Orders', is_active: true }]

/** The rows Casbin itself holds, as text, sorted. */
function casbinRows(engine: PermissionEngine, ptype: 'p' | 'g'): string[] {
  const snapshot = (engine as unknown as { snapshot: { enforcer: { getModel(): { model: Map<string, Map<string, { policy: string[][] }>> } } } }).snapshot
  return (snapshot.enforcer.getModel().model.get(ptype)?.get(ptype)?.policy ?? []).map((r) => r.join(',')).sort()
}

t.test('writes on the reference model keep Casbin, its role links and the index in step, without Casbin scans', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const engine = await PermissionEngine.load(db, modelText, { rootRoles: [], catalog })
  t.equal(engine.mode, 'index')
  const user = { id: 'u1', principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'clerk' }

  await engine.addRule('p', ['clerk', 'm1', 'orders', 'read', 'allow'])
  await engine.addRule('p', ['clerk', 'm1', 'orders', 'read', 'allow'])
  t.same(casbinRows(engine, 'p'), ['clerk,m1,orders,read,allow'], 'a repeated add leaves one row')
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, 'no role link yet')

  await engine.addRule('g', ['u1', 'clerk', 'm1'])
  t.same(casbinRows(engine, 'g'), ['u1,clerk,m1'])
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), true, "Casbin's role manager has the new link")
  t.equal(engine.decide(user, 'm1', 'orders', 'read'), true, 'and so has the index')

  await engine.addRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, 'a deny row')
  await engine.removeRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
  await engine.removeRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
  t.same(casbinRows(engine, 'p'), ['clerk,m1,orders,read,allow'], 'removed once, a second removal is harmless')

  await engine.removeRule('g', ['u1', 'clerk', 'm1'])
  t.same(casbinRows(engine, 'g'), [])
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, 'the link is gone from the role manager')
  t.equal(engine.decide(user, 'm1', 'orders', 'read'), false, 'and from the index')
})

t.test('removeRows removes exactly the equal rows and keeps the order of the rest', async (t) => {
  const enforcer = await newEnforcer(newModelFromString(modelText))
  const model = enforcer.getModel()
  const rows = model.model.get('p')?.get('p')?.policy as string[][]
  rows.push(['a', 'm1', 'o', 'x', 'allow'], ['b', 'm1', 'o', 'x', 'allow'], ['a', 'm1', 'o', 'x', 'deny'], ['a', 'm1', 'o', 'x'], ['c', 'm1', 'o', 'x', 'allow'])
  t.equal(removeRows(model, 'p', ['a', 'm1', 'o', 'x', 'allow']), true)
  t.same(rows.map((r) => r.join(',')), ['b,m1,o,x,allow', 'a,m1,o,x,deny', 'a,m1,o,x', 'c,m1,o,x,allow'], 'a shorter row with the same start stays')
  t.equal(removeRows(model, 'p', ['z', 'm1', 'o', 'x', 'allow']), false, 'nothing to remove')
})
