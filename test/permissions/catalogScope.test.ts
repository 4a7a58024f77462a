/**
 * Catalog scope: a `platform` pair (merchant:onboard) is for system-owner
 * users only. Granting, denying or overriding it in a merchant domain or for
 * a merchant user is refused with 400 `111` (dry runs too); a `global` grant
 * to a sub-role code merchants use as well reaches system-owner users only,
 * and for a merchant user the decision, its explanation, the effective set,
 * the holders and the preview all say no. On both databases.
 */
import type { LightMyRequestResponse } from 'fastify'
import t, { type Test } from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { buildTestApp, onboard, register } from '../helper.js'
import { errorShapeProblems } from '../support/envelope.js'
import { roleCommand, userCommand } from '../support/permissionCommands.js'

const ONBOARD = { obj: 'merchant', act: 'onboard' }

function expectError(t: Test, res: LightMyRequestResponse, status: number, code: string, name: string): void {
  t.equal(res.statusCode, status, `${name}: ${res.body}`)
  t.equal((res.json() as { response_code?: string }).response_code, code, `${name}: code ${code}`)
  t.same(errorShapeProblems(res), [], `${name}: an envelope`)
}

const dataOf = async <T>(res: Promise<LightMyRequestResponse>): Promise<T> => {
  const answer = await res
  if (answer.statusCode !== 200) throw new Error(`${answer.statusCode} ${answer.body}`)
  return (answer.json() as { data: T }).data
}

/** m1 with its owner and a clerk; a system-owner user with the same sub-role code; the merchant owner may grant. */
async function world(t: Test) {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const staff = await register(ta, { email: 'staff@example.com', sub_role_code: 'clerk' })
  return { ta, owner, clerk, staff }
}

t.test('a platform pair is refused in a merchant domain and for a merchant user, dry runs included', async (t) => {
  const { ta, owner, clerk, staff } = await world(t)
  const ownerToken = ta.tokenFor(owner)
  const refused: Array<[string, () => Promise<LightMyRequestResponse>]> = [
    ['a role grant in m1', () => roleCommand(ta, 'grant', 'clerk', { ...ONBOARD, domain: 'm1' })],
    ['the same as a dry run', () => roleCommand(ta, 'grant', 'clerk', { ...ONBOARD, domain: 'm1', dry_run: true })],
    ["the merchant's super_admin granting it in its merchant", () => roleCommand(ta, 'grant', 'clerk', ONBOARD, ownerToken)],
    ["an allow override for m1's clerk", () => userCommand(ta, 'grant', clerk, ONBOARD)],
    ['the same as a dry run', () => userCommand(ta, 'grant', clerk, { ...ONBOARD, dry_run: true })],
    ["a deny override for m1's clerk", () => userCommand(ta, 'deny', clerk, ONBOARD)],
    ["an allow override for a system-owner user in m1", () => userCommand(ta, 'grant', staff, { ...ONBOARD, domain: 'm1' })],
    ['a deny override for a system-owner user in m1, as a dry run', () => userCommand(ta, 'deny', staff, { ...ONBOARD, domain: 'm1', dry_run: true })],
  ]
  for (const [name, call] of refused) expectError(t, await call(), 400, '111', name)
  const rows = await ta.service.db.query("SELECT 1 FROM casbin_rule WHERE v2 = 'merchant' UNION ALL SELECT 1 FROM permission_overrides WHERE obj = 'merchant'")
  t.equal(rows.rows.length, 0, 'nothing was written')

  const texts: Record<string, string> = {
    en: 'The permission merchant:onboard is for system-owner accounts only: it cannot be granted, denied or overridden in merchant m1 or for a merchant account.',
    es: 'El permiso merchant:onboard es solo para cuentas del propietario del sistema: no se puede conceder, denegar ni asignar en el comercio m1 ni a una cuenta de comercio.',
  }
  for (const [lang, text] of Object.entries(texts)) {
    const res = await ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/clerk/grant?lang=${lang}`, body: { command: 'grant-role-permission', data: { ...ONBOARD, domain: 'm1' } } })
    t.equal((res.json() as { response_text: string }).response_text, text, `the text names the pair and the merchant (${lang})`)
  }

  t.equal((await roleCommand(ta, 'grant', 'clerk', { ...ONBOARD, dry_run: true })).statusCode, 200, 'in global, to a role: allowed')
  t.equal((await userCommand(ta, 'grant', staff, { ...ONBOARD, dry_run: true })).statusCode, 200, 'in global, to a system-owner user: allowed')
  t.equal((await userCommand(ta, 'revoke', clerk, ONBOARD)).statusCode, 200, 'a revoke is not refused: it clears rows that never counted')
})

t.test("a global grant of a platform pair to a sub-role code reaches system-owner users only, and every answer agrees", async (t) => {
  const { ta, owner, clerk, staff } = await world(t)

  const preview = await dataOf<{ preview: { users_gaining: number; sample: Array<{ user_id: string }> } }>(
    roleCommand(ta, 'grant', 'clerk', { ...ONBOARD, dry_run: true }),
  )
  t.equal(preview.preview.users_gaining, 1, 'the preview counts one user gaining it')
  t.same(preview.preview.sample.map((u) => u.user_id), [staff.id], 'the system-owner user, not the merchant clerk')
  t.equal((await roleCommand(ta, 'grant', 'clerk', ONBOARD)).statusCode, 200)

  const check = (user: Account, explain = false) =>
    dataOf<{ allowed: boolean; reason?: { kind: string; rule?: string[] } }>(
      ta.call({ method: 'GET', url: `/v2/authz/check?obj=merchant&act=onboard&user_id=${user.id}${explain ? '&explain=true' : ''}` }),
    )
  const effective = async (user: Account) =>
    (await dataOf<{ permissions: Array<{ obj: string; act: string }> }>(ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${user.id}` }))).permissions.map(
      (p) => `${p.obj}:${p.act}`,
    )
  const holders = async (domain: string) =>
    (await dataOf<{ items: Array<{ user_id: string }> }>(ta.call({ method: 'GET', url: `/v2/admin/permissions/holders?obj=merchant&act=onboard&domain=${domain}` }))).items.map(
      (h) => h.user_id,
    )

  t.same(await check(clerk), { allowed: false }, "m1's clerk: the check says no")
  t.same(await check(clerk, true), { allowed: false, reason: { kind: 'none' } }, 'its explanation names no rule')
  t.notOk((await effective(clerk)).includes('merchant:onboard'), 'its effective set does not list it')
  const own = await dataOf<{ permissions: Array<{ obj: string }> }>(ta.call({ method: 'GET', url: '/v2/profile/permissions', token: ta.tokenFor(clerk) }))
  t.notOk(own.permissions.some((p) => p.obj === 'merchant'), 'nor does its own profile')
  t.same(await check(owner), { allowed: false }, "m1's super_admin: root holds everything but a platform pair")
  t.same(await check(owner, true), { allowed: false, reason: { kind: 'none' } })
  t.notOk((await effective(owner)).includes('merchant:onboard'), "the super_admin's effective set does not list it")
  t.same((await holders('m1')).sort(), [ta.root.id, staff.id].sort(), 'in m1 only system-owner users hold it (they work across merchants)')
  const batch = await dataOf<{ results: Array<{ allowed: boolean }> }>(
    ta.call({ method: 'POST', url: '/v2/authz/check-batch', body: { command: 'check-batch', data: { user_id: clerk.id, checks: [ONBOARD] } } }),
  )
  t.same(batch.results.map((r) => r.allowed), [false], 'check-batch agrees')

  t.same(await check(staff, true), { allowed: true, reason: { kind: 'role', rule: ['clerk', 'global', 'merchant', 'onboard', 'allow'] } }, 'the system-owner user holds it')
  t.ok((await effective(staff)).includes('merchant:onboard'), 'and its effective set lists it')
  t.same((await holders('global')).sort(), [ta.root.id, staff.id].sort(), 'the holders in global: root and the system-owner user')
  const rolePairs = async (role: string, domain: string) =>
    (await dataOf<{ permissions: Array<{ obj: string; act: string }> }>(ta.call({ method: 'GET', url: `/v2/admin/permissions/roles/${role}?domain=${domain}` }))).permissions.map(
      (p) => `${p.obj}:${p.act}`,
    )
  t.ok((await rolePairs('clerk', 'global')).includes('merchant:onboard'), "the role's permissions in global list the grant")
  t.notOk((await rolePairs('clerk', 'm1')).includes('merchant:onboard'), "in m1 they leave it out: no merchant user holds it")
  t.notOk((await rolePairs('super_admin', 'm1')).includes('merchant:onboard'), "nor does the root sub-role's list in m1")
  t.ok((await rolePairs('super_admin', 'global')).includes('merchant:onboard'), 'in global the root sub-role lists it')

  const onboarded = await ta.call({
    method: 'POST',
    url: '/v2/admin/merchants',
    token: ta.tokenFor(clerk),
    body: { command: 'onboard-merchant', data: { merchant_id: 'm2', email: 'owner@m2.example', password: 'merchant-pass-1', name: 'Owner m2' } },
  })
  t.equal(onboarded.statusCode, 403, 'the API refuses the clerk, as every answer above said')

  const revoke = await dataOf<{ preview: { users_losing: number; sample: Array<{ user_id: string }> } }>(
    roleCommand(ta, 'revoke', 'clerk', { ...ONBOARD, dry_run: true }),
  )
  t.same([revoke.preview.users_losing, revoke.preview.sample.map((u) => u.user_id)], [1, [staff.id]], 'a revoke preview counts the same user losing it')
})

t.test('the catalog shows each pair’s scope', async (t) => {
  const { ta } = await world(t)
  const { items } = await dataOf<{ items: Array<{ obj: string; act: string; scope: string }> }>(ta.call({ method: 'GET', url: '/v2/admin/permissions/catalog' }))
  const scopes = Object.fromEntries(items.map((e) => [`${e.obj}:${e.act}`, e.scope]))
  t.equal(scopes['merchant:onboard'], 'platform')
  t.equal(scopes['orders:read'], 'any')
  t.same(
    items.filter((e) => e.scope === 'platform').map((e) => `${e.obj}:${e.act}`),
    ['merchant:onboard'],
    'the only platform pair',
  )
})
