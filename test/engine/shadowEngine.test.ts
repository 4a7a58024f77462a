/** The shadow engine never fails the live engine's change: one it cannot apply sets it aside until the next full reload. */
import t from 'tap'
import { emptyPolicyRecord } from '../../src/engine/adapter.js'
import { ShadowEngine } from '../../src/engine/shadowEngine.js'
import { shippedModelText } from '../support/shadowModels.js'

const state = { rootRoles: [], catalog: [{ obj: 'orders', act: 'refund', label: 'Refund', group_name: 'Orders', is_active: true }] }
const clerk = { id: 'u-1', principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'clerk' }

t.test('a change the shadow cannot apply sets it aside, says why, and a reload builds it again', async (t) => {
  const record = emptyPolicyRecord()
  record.rules.push({ ptype: 'p', fields: ['clerk', 'm1', 'orders', 'refund', 'allow'] }, { ptype: 'g', fields: ['u-1', 'clerk', 'm1'] })
  const told: string[] = []
  const shadow = await ShadowEngine.load(shippedModelText, record, state, Date.now, (why) => told.push(why))
  t.equal(shadow.engine?.decide(clerk, 'm1', 'orders', 'refund'), true, 'loaded from the recorded rows')
  await shadow.follow(() => {
    throw new Error('boom')
  })
  t.equal(shadow.engine, null, 'set aside')
  t.equal(shadow.setAsideFor, 'applying a change to the shadow model failed: boom')
  t.same(told, ['applying a change to the shadow model failed: boom'], 'told once')
  await shadow.follow(() => t.fail('a shadow set aside is given no change'))

  const again = emptyPolicyRecord()
  again.rules.push({ ptype: 'p', fields: ['clerk', 'm1', 'orders', 'refund', 'allow'] }, { ptype: 'g', fields: ['u-1', 'clerk', 'm1'] })
  await shadow.reload(again, state)
  t.equal(shadow.setAsideFor, null)
  t.equal(shadow.engine?.decide(clerk, 'm1', 'orders', 'refund'), true, 'following again after a reload')
})
