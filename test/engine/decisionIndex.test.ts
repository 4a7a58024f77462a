import t from 'tap'
import { DecisionIndex } from '../../src/engine/decisionIndex.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the decision index in memory')

t.test('the index answers as model.conf reads', async (t) => {
  const index = DecisionIndex.build(
    [
      ['clerk', 'm1', 'orders', 'read', 'allow'],
      ['clerk', 'global', 'orders', 'refund', 'allow'],
      ['clerk', 'm1', 'orders', 'refund', 'deny'],
      ['support', 'global', 'payouts', 'read', 'allow'],
      ['support', 'm2', 'payouts', 'approve', 'allow'],
      ['u-1', 'm1', 'customers', 'read', 'allow'],
      ['u-2', 'global', 'customers', 'export', 'allow'],
      ['u-2', 'm2', 'payouts', 'read', 'deny'],
      ['clerk', 'm1', 'odd', 'value', 'maybe'],
    ],
    [
      ['u-1', 'clerk', 'm1'],
      ['u-2', 'support', 'global'],
    ],
  )
  // Merchant user u-1 (clerk in m1).
  t.equal(index.allowed('u-1', 'm1', 'orders', 'read'), true, 'role grant in its merchant')
  t.equal(index.allowed('u-1', 'm1', 'orders', 'refund'), false, 'a deny in m1 beats the global allow')
  t.equal(index.allowed('u-1', 'm1', 'customers', 'read'), true, 'its own override')
  t.equal(index.allowed('u-1', 'm2', 'orders', 'read'), false, 'nothing outside its merchant')
  t.equal(index.allowed('u-1', 'global', 'orders', 'refund'), false, 'the role is assigned in m1 only')
  t.equal(index.allowed('u-1', 'm1', 'odd', 'value'), false, 'an effect other than allow/deny counts for nothing')
  // System-owner user u-2 (support in global).
  t.equal(index.allowed('u-2', 'm1', 'payouts', 'read'), true, 'global grants reach every domain')
  t.equal(index.allowed('u-2', 'm2', 'payouts', 'read'), false, 'its deny in m2')
  t.equal(index.allowed('u-2', 'm2', 'payouts', 'approve'), false, "a merchant's grant to the role code never reaches system-owner users")
  t.equal(index.allowed('u-2', 'm3', 'customers', 'export'), true)
  t.equal(index.allowed('nobody', 'm1', 'orders', 'read'), false)
  t.equal(index.allowed('u-1', 'm1', 'never', 'seen'), false)

  t.test('incremental changes', async (t) => {
    index.addPolicy(['clerk', 'm1', 'payouts', 'read', 'allow'])
    t.equal(index.allowed('u-1', 'm1', 'payouts', 'read'), true)
    index.addPolicy(['u-1', 'm1', 'payouts', 'read', 'deny'])
    t.equal(index.allowed('u-1', 'm1', 'payouts', 'read'), false)
    index.removePolicy(['u-1', 'm1', 'payouts', 'read', 'deny'])
    t.equal(index.allowed('u-1', 'm1', 'payouts', 'read'), true)
    index.removePolicy(['clerk', 'm1', 'payouts', 'read', 'allow'])
    t.equal(index.allowed('u-1', 'm1', 'payouts', 'read'), false)
    index.removeGrouping(['u-1', 'clerk', 'm1'])
    t.equal(index.allowed('u-1', 'm1', 'orders', 'read'), false, 'without its role')
    t.equal(index.allowed('u-1', 'm1', 'customers', 'read'), true, 'its own rows stay')
    index.addGrouping(['u-1', 'clerk', 'm1'])
    t.equal(index.allowed('u-1', 'm1', 'orders', 'read'), true)
    index.removePolicy(['ghost', 'm9', 'no', 'thing', 'allow'])
    t.same(index.rulesOf('ghost', ['m9']), [], 'removing what is not there changes nothing')
  })

  t.test('role hierarchies, up to the depth Casbin follows', async (t) => {
    const chain = DecisionIndex.build(
      [['r11', 'm1', 'orders', 'read', 'allow']],
      [['u', 'r1', 'm1'], ...Array.from({ length: 10 }, (_, i) => [`r${i + 1}`, `r${i + 2}`, 'm1'])],
    )
    // u → r1 → … → r11 is 11 links; Casbin follows at most 10.
    t.equal(chain.allowed('u', 'm1', 'orders', 'read'), false)
    t.equal(chain.allowed('r1', 'm1', 'orders', 'read'), true, 'ten links are followed')
    chain.addGrouping(['u', 'r2', 'm1'])
    t.equal(chain.allowed('u', 'm1', 'orders', 'read'), true, 'a shorter path')
    chain.addGrouping(['r11', 'r1', 'm1'])
    t.equal(chain.allowed('u', 'm1', 'orders', 'read'), true, 'a cycle does not loop forever')
  })

  t.test('a link added or removed further up the hierarchy reaches users already asked about', async (t) => {
    const tree = DecisionIndex.build([['auditor', 'm1', 'ledger', 'read', 'allow']], [['u', 'clerk', 'm1']])
    t.equal(tree.allowed('u', 'm1', 'ledger', 'read'), false, 'asked once before the link exists')
    tree.addGrouping(['clerk', 'auditor', 'm1'])
    t.equal(tree.allowed('u', 'm1', 'ledger', 'read'), true, 'the new link between two roles counts at once')
    tree.removeGrouping(['clerk', 'auditor', 'm1'])
    t.equal(tree.allowed('u', 'm1', 'ledger', 'read'), false, 'and so does its removal')
    tree.addGrouping(['clerk', 'auditor', 'global'])
    t.equal(tree.allowed('u', 'm1', 'ledger', 'read'), false, 'a link in global does not carry m1 rows')
  })

  t.test('rulesOf lists one subject without scanning others', async (t) => {
    t.same(
      index.rulesOf('clerk', ['m1', 'global']).map((r) => `${r.domain} ${r.obj}:${r.act} ${r.effect}`).sort(),
      ['global orders:refund allow', 'm1 orders:read allow', 'm1 orders:refund deny'],
    )
    t.same(index.rulesOf('clerk', ['m2']), [])
  })
})

t.test('p rows filed in the background: whatever reads or changes them first finishes the filing, and the stamp stays', async (t) => {
  const rowOf = (i: number) => [`r${i}`, `m${i % 7}`, 'orders', 'read', i % 5 === 0 ? 'deny' : 'allow']
  const rows = Array.from({ length: 60_000 }, (_, i) => rowOf(i))
  let reads = 0
  const source = () => {
    reads++
    return rows
  }
  const turn = () => new Promise((resolve) => setImmediate(resolve))

  const asked = DecisionIndex.deferringPolicies(source, [['u', 'r1', 'm1']])
  const stamp = asked.stamp
  t.equal(asked.allowed('u', 'm1', 'orders', 'read'), true, "a read before any slice: the member reaches r1's allow")
  t.equal(asked.allowed('r5', 'm5', 'orders', 'read'), false, 'a deny filed')
  t.equal(asked.allows('r59999', `m${59_999 % 7}`, 'orders', 'read'), true, 'the last row is filed')
  t.equal(asked.stamp, stamp, 'filing the same rows marks no change')
  await turn()
  t.equal(reads, 1, 'the rows were read once')

  // Part filed by the slices, then a write: the rest is filed first, so the write lands on every row.
  const written = DecisionIndex.deferringPolicies(() => rows, [])
  await turn()
  await turn()
  written.removePolicy(rowOf(59_998))
  written.addPolicy(['r60000', 'm1', 'orders', 'read', 'allow'])
  t.equal(written.allows('r59998', `m${59_998 % 7}`, 'orders', 'read'), false, 'a row not filed yet when removed stays removed')
  t.equal(written.allows('r60000', 'm1', 'orders', 'read'), true, 'the row added is held')
  for (let i = 0; i < 8; i++) await turn()
  t.equal(written.allows('r59998', `m${59_998 % 7}`, 'orders', 'read'), false, 'and no later slice files it again')
  t.equal(written.allows('r59997', `m${59_997 % 7}`, 'orders', 'read'), true, 'every other row is held')
})
