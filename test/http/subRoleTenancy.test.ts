import t from 'tap'
import type { Static } from '@sinclair/typebox'
import type { SubRoleItem as SubRoleItemSchema } from '../../src/http/routes/subRoles.js'
import type { LightMyRequestResponse } from 'fastify'
import { backend, buildTestApp, freshDatabase, onboard, register, secondConnection, type TestApp } from '../helper.js'

/**
 * Sub-roles belong to a domain: a merchant never sees, blocks, joins or
 * detects another merchant's sub-role, with SUB_ROLES_EXPLICIT on and off,
 * and the system owner is not blocked by a merchant's code.
 */

type SubRoleItem = Static<typeof SubRoleItemSchema>

const createSubRole = (ta: TestApp, token: string, data: Record<string, unknown>) =>
  ta.call({ method: 'POST', url: '/v2/admin/sub-roles', token, body: { command: 'create-sub-role', data } })

const listSubRoles = async (ta: TestApp, token: string, query = ''): Promise<SubRoleItem[]> => {
  const res = await ta.call({ method: 'GET', url: `/v2/admin/sub-roles?page_size=100${query}`, token })
  if (res.statusCode !== 200) throw new Error(`list failed: ${res.statusCode} ${res.body}`)
  return (res.json() as { data: { items: SubRoleItem[] } }).data.items
}

/**
 * An answer with the code it names replaced, to compare two answers that
 * differ only there. A write that went through differs in what it made (an
 * id, an e-mail, the revision), so only its status and the names of its
 * fields are compared.
 */
const withoutCode = (res: LightMyRequestResponse, code: string) => {
  const body = res.body.replaceAll(code, '<code>')
  const written = res.statusCode < 300 && (JSON.parse(body) as { data: { preview?: unknown } }).data.preview === undefined
  return { status: res.statusCode, body: written ? Object.keys((JSON.parse(body) as { data: object }).data).sort() : body }
}

for (const explicit of [false, true]) {
  t.test(`SUB_ROLES_EXPLICIT=${explicit}`, async (t) => {
    const ta = await buildTestApp(t, { env: { SUB_ROLES_EXPLICIT: String(explicit) } })
    const m1 = ta.tokenFor(await onboard(ta, 'm1'))
    const m2 = ta.tokenFor(await onboard(ta, 'm2'))
    const made = await createSubRole(ta, m2, { code: 'm2secret', label: 'M2 secret label' })
    t.equal(made.statusCode, 201, 'm2 creates m2secret')
    t.equal(made.json().data.domain, 'm2', "in its own merchant, whatever it asks")
    t.equal((await createSubRole(ta, m2, { code: 'm2only', label: 'Only m2', domain: 'global' })).json().data.domain, 'm2', 'a merchant cannot create in global')
    const m2Clerk = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'm2secret' }, m2)
    const grantM2 = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/m2secret/grant',
      token: m2,
      body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'refund' } },
    })
    t.equal(grantM2.statusCode, 200, 'm2 grants its sub-role something')

    t.test('m1 does not see it', async (t) => {
      const items = await listSubRoles(ta, m1)
      t.notOk(items.some((i) => i.code === 'm2secret' || i.code === 'm2only'), "m2's codes are not in m1's list")
      t.notMatch(JSON.stringify(items), /M2 secret label|Only m2/, "nor m2's labels")
      const asked = await listSubRoles(ta, m1, '&domain=m2')
      t.notOk(asked.some((i) => i.code === 'm2secret'), 'asking for m2 answers m1')
      const own = await listSubRoles(ta, m2)
      t.same(own.find((i) => i.code === 'm2secret'), { code: 'm2secret', label: 'M2 secret label', is_root: false, members: 1, rules: 1 }, 'm2 sees its own')
      t.notOk((await listSubRoles(ta, ta.rootToken)).some((i) => i.code === 'm2secret'), 'global does not list it')
    })

    t.test('m1 is not blocked by it, and neither is the system owner', async (t) => {
      const mine = await createSubRole(ta, m1, { code: 'm2secret', label: 'Mine' })
      t.equal(mine.statusCode, 201, 'm1 creates the same code')
      t.same(mine.json().data, { code: 'm2secret', label: 'Mine', domain: 'm1', is_root: false, revision: mine.json().data.revision })
      t.equal((await createSubRole(ta, m1, { code: 'm2secret', label: 'Again' })).json().response_code, '503', 'but not twice in m1')
      t.equal((await listSubRoles(ta, m1)).find((i) => i.code === 'm2secret')?.label, 'Mine', "m1's label, not m2's")
      t.equal((await listSubRoles(ta, m2)).find((i) => i.code === 'm2secret')?.label, 'M2 secret label', "m2's label unchanged")

      const platform = await createSubRole(ta, ta.rootToken, { code: 'm2secret', label: 'Platform template' })
      t.equal(platform.statusCode, 201, "the system owner creates a global sub-role of a merchant's code")
      t.equal(platform.json().data.domain, 'global')
      t.equal((await listSubRoles(ta, m2)).find((i) => i.code === 'm2secret')?.label, 'M2 secret label', "a merchant's own label wins over the template's")
      const intoM2 = await createSubRole(ta, ta.rootToken, { code: 'm2secret', label: 'x', domain: 'm2' })
      t.equal(intoM2.statusCode, 409, 'the system owner creating it in m2 itself: it exists there')
      t.equal(intoM2.json().response_code, '503')
      const staffRole = await createSubRole(ta, ta.rootToken, { code: 'm2only', label: 'For m1', domain: 'm1' })
      t.equal(staffRole.json().data.domain, 'm1', 'a system owner creates in the merchant it names')
      t.equal((await listSubRoles(ta, m1)).find((i) => i.code === 'm2only')?.label, 'For m1')
      t.equal((await listSubRoles(ta, m2)).find((i) => i.code === 'm2only')?.label, 'Only m2', "m2's stays its own")
      const nowhere = await createSubRole(ta, ta.rootToken, { code: 'lost', label: 'x', domain: 'nowhere' })
      t.equal(nowhere.statusCode, 404, 'a domain that names no merchant')
      t.equal(nowhere.json().response_code, '402')
      const audit = await ta.service.db.query<{ domain: string; merchant_id: string | null }>(
        "SELECT domain, merchant_id FROM permission_audit WHERE action = 'sub_role_created' AND target_id = 'm2only' ORDER BY id",
      )
      t.same(audit.rows, [{ domain: 'm2', merchant_id: 'm2' }, { domain: 'm1', merchant_id: 'm1' }], 'audited with its domain, in its tenant')
    })

    t.test('m1 neither joins nor detects a code that only m2 has', async (t) => {
      const { rows } = await ta.service.db.query<{ n: number }>("SELECT count(*)::int AS n FROM sub_roles WHERE code = 'secret_two'")
      t.equal(rows[0]?.n, 0)
      await createSubRole(ta, m2, { code: 'secret_two', label: 'Two' })
      const clerk = await register(ta, { email: `clerk-${explicit}@m1.example`, sub_role_code: 'm2secret' }, m1)

      // Every command that names a sub-role, for a code m2 has and one nobody has: the same answer.
      const probes: Array<[string, (code: string) => Promise<LightMyRequestResponse>]> = [
        [
          'registration',
          (code) =>
            ta.call({
              method: 'POST',
              url: '/v2/admin/register',
              token: m1,
              body: { command: 'register-admin', data: { email: `${code}@m1.example`, password: 'admin-pass-123', name: 'N', sub_role_code: code } },
            }),
        ],
        ['change-sub-role', (code) => ta.call({ method: 'POST', url: `/v2/admin/accounts/${clerk.id}/sub-role`, token: m1, body: { command: 'change-sub-role', data: { sub_role_code: code } } })],
        ...(['grant', 'revoke'] as const).flatMap((action): Array<[string, (code: string) => Promise<LightMyRequestResponse>]> =>
          [true, false].map((dryRun) => [
            `${action}${dryRun ? ' (dry run)' : ''}`,
            (code: string) =>
              ta.call({
                method: action === 'grant' ? 'POST' : 'DELETE',
                url: `/v2/admin/permissions/roles/${code}/${action}`,
                token: m1,
                body: { command: `${action}-role-permission`, data: { obj: 'orders', act: 'read', ...(dryRun ? { dry_run: true } : {}) } },
              }),
          ]),
        ),
      ]
      // A dry run first, so that the real write has not made the code known in m1 yet.
      probes.sort(([a], [b]) => Number(b.includes('dry run')) - Number(a.includes('dry run')))
      for (const [name, probe] of probes) {
        const taken = withoutCode(await probe('secret_two'), 'secret_two')
        const unknown = withoutCode(await probe('never_made'), 'never_made')
        t.same(taken, unknown, `${name}: m2's code answers as an unknown one`)
        if (explicit) t.match(taken, { status: 404, body: /"response_code":"403"/ }, `${name}: 404 403 with SUB_ROLES_EXPLICIT`)
        else if (name.includes('dry run')) t.match(taken, { status: 200, body: /"changed":/ }, `${name}: previewed`)
        else t.ok(taken.status === 200 || taken.status === 201, `${name}: accepted without SUB_ROLES_EXPLICIT`)
      }

      const byCode = async (domain: string) =>
        (await ta.service.db.query<{ label: string | null }>('SELECT label FROM sub_roles WHERE domain = $1 AND code = $2', [domain, 'secret_two'])).rows
      t.same(await byCode('m1'), explicit ? [] : [{ label: null }], explicit ? 'nothing made in m1' : 'made in m1, without m2\'s label')
      t.same(await byCode('m2'), [{ label: 'Two' }], "m2's row untouched")

      // Joined or not, m1's holder of the code gets nothing of m2's grants to it.
      const check = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=refund&user_id=${clerk.id}`, token: ta.rootToken })
      t.equal(check.json().data.allowed, false, "m2's grant to m2secret does not reach m1's holder")
      const m2Check = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=refund&user_id=${m2Clerk.id}`, token: ta.rootToken })
      t.equal(m2Check.json().data.allowed, true, "and does reach m2's")
      t.equal((await listSubRoles(ta, m2)).find((i) => i.code === 'm2secret')?.members, 1, "m1's holders are not counted in m2")
    })

    t.test('a global template is known in every merchant; grants to it reach them all', async (t) => {
      await createSubRole(ta, ta.rootToken, { code: 'cashier', label: 'Cashier' })
      const a = await register(ta, { email: `cashier-${explicit}@m1.example`, sub_role_code: 'cashier' }, m1)
      const b = await register(ta, { email: `cashier-${explicit}@m2.example`, sub_role_code: 'cashier' }, m2)
      const grant = await ta.call({
        method: 'POST',
        url: '/v2/admin/permissions/roles/cashier/grant',
        body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read' } },
      })
      t.equal(grant.statusCode, 200)
      for (const user of [a, b]) {
        const res = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${user.id}` })
        t.equal(res.json().data.allowed, true, `${user.email} holds the global grant`)
      }
      t.same(
        [await listSubRoles(ta, m1), await listSubRoles(ta, m2)].map((items) => items.find((i) => i.code === 'cashier')),
        [
          { code: 'cashier', label: 'Cashier', is_root: false, members: 1, rules: 0 },
          { code: 'cashier', label: 'Cashier', is_root: false, members: 1, rules: 0 },
        ],
        "the template in each merchant's list, with its members there only",
      )
      const { rows } = await ta.service.db.query<{ domain: string }>("SELECT domain FROM sub_roles WHERE code = 'cashier'")
      t.same(rows, [{ domain: 'global' }], 'using a template in a merchant makes no row of its own')
    })
  })
}

t.test('another replica learns sub-roles per domain', { skip: backend === 'postgres' ? false : 'two replicas need PostgreSQL' }, async (t) => {
  const env = { SUB_ROLES_EXPLICIT: 'true' }
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env })
  const owner = await onboard(a, 'm1')
  await onboard(a, 'm2')
  const made = await createSubRole(a, a.tokenFor(owner), { code: 'picker', label: 'Picker' })
  t.equal(made.statusCode, 201)
  const registration = (merchant: string) =>
    b.call({
      method: 'POST',
      url: '/v2/admin/register',
      body: { command: 'register-admin', data: { email: `picker@${merchant}.example`, password: 'admin-pass-123', name: 'P', sub_role_code: 'picker', merchant_id: merchant } },
    })
  t.equal((await registration('m1')).statusCode, 201, 'the other replica accepts it in m1')
  t.equal((await registration('m2')).json().response_code, '403', 'and not in m2')
  const items = (await b.call({ method: 'GET', url: '/v2/admin/sub-roles?domain=m1' })).json().data.items as SubRoleItem[]
  t.same(items.find((i) => i.code === 'picker'), { code: 'picker', label: 'Picker', is_root: false, members: 1, rules: 0 }, 'and lists it in m1 with its label')
})
