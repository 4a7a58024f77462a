import t from 'tap'
import { ACCOUNT_CEILING_FACTOR, judgeAttempt, loginLimits, type RecentFailures } from '../../src/domain/loginLimits.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('a pure domain rule')

/** When a password check is admitted: per address, then per account unless the network is known. */

t.test('the ceiling per account is a multiple of the limit per address', async (t) => {
  t.same(loginLimits(10), { perAddress: 10, perAccount: 10 * ACCOUNT_CEILING_FACTOR })
})

t.test('judgeAttempt', async (t) => {
  const limits = { perAddress: 3, perAccount: 6 }
  const recent = (fromAddress: number[], all: number[], knownNetwork = false): RecentFailures => ({ fromAddress, all, knownNetwork })
  const cases: [string, RecentFailures, ReturnType<typeof judgeAttempt>][] = [
    ['no failures', recent([], []), { admitted: true }],
    ['under both limits', recent([900, 800], [900, 800, 700]), { admitted: true }],
    ['the address reached its limit: wait for its oldest counted failure', recent([900, 800, 12.2], [900, 800, 12.2]), { admitted: false, retryAfterSeconds: 13 }],
    ['other addresses failing do not limit this one', recent([], [900, 800, 700, 600, 500]), { admitted: true }],
    ['the ceiling reached: a new network waits for the account\'s oldest counted failure', recent([], [900, 800, 700, 600, 500, 40]), { admitted: false, retryAfterSeconds: 40 }],
    ['the ceiling reached: a known network passes it', recent([], [900, 800, 700, 600, 500, 40], true), { admitted: true }],
    ['a known network still has its own limit', recent([900, 800, 700], [900, 800, 700, 600, 500, 40], true), { admitted: false, retryAfterSeconds: 700 }],
    ['a wait is at least a second', recent([900, 800, 0.001], []), { admitted: false, retryAfterSeconds: 1 }],
  ]
  for (const [name, input, expected] of cases) t.same(judgeAttempt(input, limits), expected, name)
})
