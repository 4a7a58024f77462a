import t from 'tap'
import { REASON, REASON_NAMES } from '../../src/engine/explain.js'
import { DecisionIndex } from '../../src/engine/decisionIndex.js'
import { holderOrder, sortedPage, type Holder } from '../../src/engine/holders.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the reverse index in memory')

const build = () =>
  DecisionIndex.build(
    [
      ['clerk', 'm1', 'orders', 'read', 'allow'],
      ['clerk', 'm2', 'orders', 'read', 'allow'],
      ['clerk', 'm1', 'orders', 'refund', 'deny'],
      ['clerk', 'global', 'orders', 'refund', 'allow'],
      ['support', 'global', 'orders', 'read', 'allow'],
      ['u-1', 'm1', 'customers', 'read', 'allow'],
      ['u-3', 'm1', 'orders', 'read', 'deny'],
    ],
    [
      ['u-1', 'clerk', 'm1'],
      ['u-3', 'clerk', 'm1'],
      ['u-2', 'support', 'global'],
      ['lead', 'clerk', 'm1'],
      ['u-4', 'lead', 'm1'],
    ],
  )

t.test('the reverse look-ups follow every change', async (t) => {
  const index = build()
  t.same(index.allowersOf('orders', 'read', 'm1').sort(), ['clerk', 'support'], 'allows in the domain and in global')
  t.same(index.allowersOf('orders', 'read', 'm3'), ['support'])
  t.same(index.allowersOf('orders', 'refund', 'm1'), ['clerk'], 'a deny is no allow; the global allow is')
  t.same(index.allowersOf('never', 'seen', 'm1'), [])
  t.same([...index.membersReaching(['clerk'], 'm1', new Set())].sort(), ['clerk', 'lead', 'u-1', 'u-3', 'u-4'], 'through a role hierarchy')
  t.same([...index.membersReaching(['clerk'], 'global', new Set())], ['clerk'])
  t.same([...index.linkDomains()].sort(), ['global', 'm1'])

  // The pair is held in two domains: dropping one keeps the subject.
  index.removePolicy(['clerk', 'm1', 'orders', 'read', 'allow'])
  t.same(index.allowersOf('orders', 'read', 'm2').sort(), ['clerk', 'support'])
  t.same(index.allowersOf('orders', 'read', 'm1'), ['support'])
  index.removePolicy(['clerk', 'm2', 'orders', 'read', 'allow'])
  t.same(index.allowersOf('orders', 'read', 'm2'), ['support'])
  index.addPolicy(['clerk', 'm1', 'orders', 'read', 'allow'])
  index.addPolicy(['clerk', 'm1', 'orders', 'read', 'allow'])
  index.removePolicy(['clerk', 'm1', 'orders', 'read', 'allow'])
  t.same(index.allowersOf('orders', 'read', 'm1'), ['support'], 'a row added twice is one row')

  const stamp = index.stamp
  index.removeGrouping(['u-1', 'clerk', 'm1'])
  t.ok(index.stamp > stamp, 'every change moves the stamp')
  t.same([...index.membersReaching(['clerk'], 'm1', new Set())].sort(), ['clerk', 'lead', 'u-3', 'u-4'])
  index.removeGrouping(['u-1', 'clerk', 'm1'])
  index.removeGrouping(['u-3', 'clerk', 'm1'])
  index.removeGrouping(['lead', 'clerk', 'm1'])
  t.same([...index.membersReaching(['clerk'], 'm1', new Set())], ['clerk'])
  index.addGrouping(['u-1', 'clerk', 'm1'])
  index.addGrouping(['u-1', 'clerk', 'm1'])
  t.same([...index.membersReaching(['clerk'], 'm1', new Set())].sort(), ['clerk', 'u-1'], 'a link added twice is one link')
  index.removeGrouping(['u-4', 'lead', 'm1'])
  index.removeGrouping(['u-2', 'support', 'global'])
  t.same([...index.linkDomains()], ['m1'], 'a domain without links is dropped')
})

t.test('a role with many members, added and removed in any order', async (t) => {
  const index = DecisionIndex.build([], [])
  const members = new Set<string>()
  const reach = () => [...index.membersReaching(['crowd'], 'm1', new Set())].filter((m) => m !== 'crowd').sort()
  for (let i = 0; i < 40; i++) {
    index.addGrouping([`u-${i}`, 'crowd', 'm1'])
    members.add(`u-${i}`)
  }
  t.same(reach(), [...members].sort())
  for (const i of [0, 39, 17, 5, 33, 1, 2, 20]) {
    index.removeGrouping([`u-${i}`, 'crowd', 'm1'])
    members.delete(`u-${i}`)
    t.same(reach(), [...members].sort(), `without u-${i}`)
  }
  for (const member of [...members]) index.removeGrouping([member, 'crowd', 'm1'])
  t.same(reach(), [])
  t.same([...index.linkDomains()], [])
})

t.test('the reason and deciding row come from the fold that answers, and the overlay agrees with allowed()', async (t) => {
  const index = build()
  /** The reason's name and the deciding row, both read from one fold. */
  const why = (subject: string, domain: string, obj: string, act: string) => [REASON_NAMES[index.reason(subject, domain, obj, act)], index.decidingRow()]
  t.same(why('u-1', 'm1', 'orders', 'read'), ['role', ['clerk', 'm1', 'orders', 'read', 'allow']])
  t.same(why('u-1', 'm1', 'orders', 'refund'), ['role_deny', ['clerk', 'm1', 'orders', 'refund', 'deny']], 'a deny beats the global allow')
  t.same(why('u-1', 'm1', 'customers', 'read'), ['user_allow', ['u-1', 'm1', 'customers', 'read', 'allow']], 'its own row')
  t.same(why('u-3', 'm1', 'orders', 'read'), ['user_deny', ['u-3', 'm1', 'orders', 'read', 'deny']])
  t.same(why('u-2', 'm7', 'orders', 'read'), ['role', ['support', 'global', 'orders', 'read', 'allow']])
  t.same(why('u-4', 'm1', 'orders', 'read'), ['role', ['clerk', 'm1', 'orders', 'read', 'allow']], 'through the hierarchy')
  t.same(why('u-1', 'm1', 'payouts', 'read'), ['none', null])
  index.reason('u-1', 'm1', 'customers', 'read')
  t.same(why('u-1', 'm1', 'nothing', 'here'), ['none', null], 'a pair never seen leaves no row of the question before')
  for (const [s, d, o, a] of [['u-1', 'm1', 'orders', 'read'], ['u-1', 'm1', 'orders', 'refund'], ['u-3', 'm1', 'orders', 'read'], ['u-1', 'm1', 'payouts', 'read']] as const) {
    t.equal(index.reason(s, d, o, a) < REASON.user_deny, index.allowed(s, d, o, a), `${s} ${o}:${a}: the reason goes with the answer`)
  }

  const grant = [{ op: 'add' as const, rule: ['clerk', 'm1', 'payouts', 'read', 'allow'] }]
  t.equal(index.allowedAfter('u-1', 'm1', 'payouts', 'read', grant), true, 'a pair the index has never seen')
  t.equal(index.allowed('u-1', 'm1', 'payouts', 'read'), false, 'the index itself is untouched')
  const lift = [{ op: 'remove' as const, rule: ['u-3', 'm1', 'orders', 'read', 'deny'] }]
  t.equal(index.allowedAfter('u-3', 'm1', 'orders', 'read', lift), true)
  t.equal(index.allowed('u-3', 'm1', 'orders', 'read'), false)
  const swap = [
    { op: 'remove' as const, rule: ['u-3', 'm1', 'orders', 'read', 'deny'] },
    { op: 'add' as const, rule: ['u-3', 'm1', 'orders', 'read', 'allow'] },
  ]
  t.equal(index.allowedAfter('u-3', 'm1', 'orders', 'read', swap), true)
  t.equal(index.allowedAfter('u-1', 'm1', 'orders', 'read', [{ op: 'remove', rule: ['clerk', 'm1', 'orders', 'read', 'allow'] }]), false)
  t.equal(index.allowedAfter('u-1', 'm1', 'orders', 'read', []), true, 'no change: the same answer')
})

t.test('a page of a list, as if the list were sorted', async (t) => {
  const holders: Holder[] = Array.from({ length: 257 }, (_, i) => ({
    user_id: `id-${i}`,
    email: `user${String((i * 73) % 257).padStart(3, '0')}@example.com`,
    sub_role_code: 'clerk',
    via: 'role',
  }))
  const sorted = [...holders].sort(holderOrder)
  for (const [start, count] of [
    [0, 20],
    [20, 20],
    [240, 20],
    [250, 100],
    [257, 10],
    [0, 1000],
    [100, 1],
  ] as const) {
    t.same(sortedPage([...holders], start, count, holderOrder), sorted.slice(start, start + count), `from ${start}, ${count}`)
  }
})
