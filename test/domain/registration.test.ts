import t from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { placeNewAdmin, type RegistrationPlacement, type RegistrationRequest } from '../../src/domain/registration.js'
import { ROOT_SUB_ROLE, isRootAccount, isRootSubRole, rootRoleCodes, type RootRoles } from '../../src/domain/root.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

/** Root is what the is_root flag says: here `super_admin` and a second flagged role, never a name test. */
const roots: RootRoles = { isRootRole: (code) => code === ROOT_SUB_ROLE || code === 'owner_root' }

type Caller = Pick<Account, 'principal_type' | 'merchant_id'>
const systemOwner: Caller = { principal_type: 'system_owner', merchant_id: null }
const merchant: Caller = { principal_type: 'merchant', merchant_id: 'm-1' }

t.test('rootRoleCodes: the flagged sub-roles, whatever their names', async (t) => {
  const cases: [string, Array<{ code: string; is_root: boolean }>, string[]][] = [
    ['none stored', [], []],
    ['super_admin flagged', [{ code: 'super_admin', is_root: true }, { code: 'clerk', is_root: false }], ['super_admin']],
    ['super_admin not flagged is not root', [{ code: 'super_admin', is_root: false }], []],
    ['another name flagged', [{ code: 'super_admin', is_root: true }, { code: 'owner_root', is_root: true }], ['super_admin', 'owner_root']],
  ]
  for (const [name, rows, expected] of cases) t.same(rootRoleCodes(rows), expected, name)
})

t.test('isRootSubRole and isRootAccount ask the flag', async (t) => {
  const flagged: RootRoles = { isRootRole: (code) => new Set(rootRoleCodes([{ code: 'owner_root', is_root: true }, { code: 'super_admin', is_root: false }])).has(code) }
  const cases: [string, RootRoles, string, boolean][] = [
    ['super_admin, flagged', roots, 'super_admin', true],
    ['a second flagged role', roots, 'owner_root', true],
    ['an ordinary role', roots, 'clerk', false],
    ['the name alone makes nothing root', flagged, 'super_admin', false],
    ['a flag makes any name root', flagged, 'owner_root', true],
  ]
  for (const [name, r, code, expected] of cases) {
    t.equal(isRootSubRole(r, code), expected, name)
    t.equal(isRootAccount(r, { sub_role_code: code }), expected, `${name} (an account)`)
  }
})

t.test('placeNewAdmin', async (t) => {
  const placed = (principal_type: RegistrationPlacement['principal_type'], merchant_id: string | null, parent_role: RegistrationPlacement['parent_role']) => ({
    principal_type,
    merchant_id,
    parent_role,
  })
  const cases: [string, Caller, RegistrationRequest, RegistrationPlacement | string][] = [
    ['a system owner registers a system owner', systemOwner, { sub_role_code: 'ops' }, placed('system_owner', null, 'system_owner')],
    ['a system owner registers into a merchant', systemOwner, { sub_role_code: 'clerk', merchant_id: 'm-2' }, placed('merchant', 'm-2', 'system_owner')],
    ['a merchant caller registers into its own merchant', merchant, { sub_role_code: 'clerk' }, placed('merchant', 'm-1', 'merchant')],
    ['a merchant caller cannot pick another merchant', merchant, { sub_role_code: 'clerk', merchant_id: 'm-2' }, placed('merchant', 'm-1', 'merchant')],
    ['super_admin is never registered', systemOwner, { sub_role_code: 'super_admin' }, 'ROOT_ROLE_NOT_REGISTRABLE'],
    ['nor by a merchant caller', merchant, { sub_role_code: 'super_admin' }, 'ROOT_ROLE_NOT_REGISTRABLE'],
    ['nor any other flagged root role', systemOwner, { sub_role_code: 'owner_root', merchant_id: 'm-1' }, 'ROOT_ROLE_NOT_REGISTRABLE'],
    ['global is no merchant', systemOwner, { sub_role_code: 'clerk', merchant_id: 'global' }, 'VALIDATION_FAILED'],
    ['whatever its case', systemOwner, { sub_role_code: 'clerk', merchant_id: 'GLOBAL' }, 'VALIDATION_FAILED'],
  ]
  for (const [name, caller, request, expected] of cases) {
    if (typeof expected !== 'string') {
      t.same(placeNewAdmin(caller, request, roots), expected, name)
      continue
    }
    t.throws(() => placeNewAdmin(caller, request, roots), { name: 'ServiceError', code: expected }, name)
  }
})

t.test('root is refused before anything else is looked at', async (t) => {
  // A root role into a reserved merchant id: the root rule answers.
  t.throws(() => placeNewAdmin(systemOwner, { sub_role_code: 'super_admin', merchant_id: 'global' }, roots), { code: 'ROOT_ROLE_NOT_REGISTRABLE' })
})
