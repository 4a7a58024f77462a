/** The expiry heap against a plain list: whatever the order of sets, clears and takes, the same overrides come out at the same instants. */
import t from 'tap'
import fc from 'fast-check'
import { OverrideExpiries } from '../../src/engine/overrideExpiryQueue.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('override expiry timers in memory')

type Step = { op: 'set'; user: number; effect: 'allow' | 'deny'; at: number } | { op: 'clear'; user: number; effect: 'allow' | 'deny' } | { op: 'take'; now: number }

const rowOf = (user: number, effect: string) => [`u${user}`, 'm1', 'orders', 'refund', effect]

t.test('sets, clears and takes agree with a naive model', async (t) => {
  const step = fc.oneof(
    fc.record({ op: fc.constant('set' as const), user: fc.integer({ min: 0, max: 6 }), effect: fc.constantFrom('allow' as const, 'deny' as const), at: fc.integer({ min: 0, max: 50 }) }),
    fc.record({ op: fc.constant('clear' as const), user: fc.integer({ min: 0, max: 6 }), effect: fc.constantFrom('allow' as const, 'deny' as const) }),
    fc.record({ op: fc.constant('take' as const), now: fc.integer({ min: 0, max: 50 }) }),
  )
  let runs = 0
  fc.assert(
    fc.property(fc.array(step as fc.Arbitrary<Step>, { maxLength: 60 }), (steps) => {
      const heap = new OverrideExpiries()
      const naive = new Map<number, { effect: string; at: number }>()
      for (const s of steps) {
        if (s.op === 'set') {
          heap.set(rowOf(s.user, s.effect), s.at)
          naive.set(s.user, { effect: s.effect, at: s.at })
        } else if (s.op === 'clear') {
          heap.clear(rowOf(s.user, s.effect))
          if (naive.get(s.user)?.effect === s.effect) naive.delete(s.user)
        } else {
          const due = [...naive.entries()].filter(([, e]) => e.at <= s.now)
          for (const [user] of due) naive.delete(user)
          const taken = heap.takeDue(s.now).map((row) => `${row[0]}:${row[4]}`).sort()
          if (JSON.stringify(taken) !== JSON.stringify(due.map(([user, e]) => `u${user}:${e.effect}`).sort())) return false
        }
        const soonest = naive.size === 0 ? null : Math.min(...[...naive.values()].map((e) => e.at))
        if (heap.next() !== soonest || heap.size !== naive.size) return false
        for (const [user, e] of naive) if (heap.at(`u${user}`, 'm1', 'orders', 'refund') !== e.at) return false
      }
      runs++
      return true
    }),
    { seed: 20261123, numRuns: 500 },
  )
  t.equal(runs, 500, 'every generated sequence agreed')
})
