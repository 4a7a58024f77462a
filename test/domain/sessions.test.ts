/**
 * The rule for tokens without a credentials version (an external issuer's):
 * `iat`, in whole seconds, against the account's last change of credentials.
 */
import t from 'tap'
import { issuedAfterCredentialsChange } from '../../src/domain/sessions.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

const changedAt = new Date('2030-01-01T00:00:10.400Z')
const second = Math.floor(changedAt.getTime() / 1000)

const cases: Array<[string, unknown, Date | null, boolean]> = [
  ['nothing changed: a token with iat passes', second - 100, null, true],
  ['nothing changed: a token without iat passes', undefined, null, true],
  ['issued a second before the change: refused', second - 1, changedAt, false],
  ['issued in the same second (before or after, it cannot tell): refused', second, changedAt, false],
  ['issued the second after: accepted', second + 1, changedAt, true],
  ['issued long after: accepted', second + 3600, changedAt, true],
  ['no iat once credentials changed: refused', undefined, changedAt, false],
  ['an iat that is not a number: refused', String(second + 1), changedAt, false],
  ['an iat that is not finite: refused', Number.POSITIVE_INFINITY, changedAt, false],
]

t.test('issuedAfterCredentialsChange', async (t) => {
  for (const [name, iat, at, expected] of cases) t.equal(issuedAfterCredentialsChange(iat, at), expected, name)
})
