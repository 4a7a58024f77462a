/**
 * apply-permission-changes over HTTP: a list of grants, denies and revokes
 * of roles and users written all or none, in one revision, with one audit
 * entry per change; each change refused exactly as its single command
 * refuses it, naming its index; duplicates and contradictions inside a list;
 * another tenant's change; the list's bound; the permissions the route asks
 * for; and the dry run's combined preview.
 */
import t, { type Test } from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { currentRevision } from '../../src/storage/revision.js'
import { buildTestApp, buildTestService, onboard, register, type TestApp } from '../helper.js'
import { roleCommand, userCommand } from '../support/permissionCommands.js'
import { cheapPasswords, changedTables, fingerprint } from '../support/security.js'

interface World {
  ta: TestApp
  m1Owner: Account
  m2Owner: Account
  c1: Account
  c2: Account
  m2Clerk: Account
  /** support, system owner: permission:assign and permission:revoke, and orders:read, nothing else. */
  staff: Account
  /** revoker, system owner: permission:revoke and orders:read only. */
  revoker: Account
}

interface Change {
  kind: string
  sub_role?: string
  user_id?: string
  obj: string
  act: string
  domain?: string
  expires_at?: string
}

async function world(t: Test): Promise<World> {
  const ta = await buildTestApp(t, { service: await buildTestService(t, { passwords: cheapPasswords() }) })
  const m1Owner = await onboard(ta, 'm1')
  const m2Owner = await onboard(ta, 'm2')
  const c1 = await register(ta, { email: 'c1@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const c2 = await register(ta, { email: 'c2@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const m2Clerk = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk', merchant_id: 'm2' })
  const staff = await register(ta, { email: 'staff@platform.example', sub_role_code: 'support' })
  const revoker = await register(ta, { email: 'revoker@platform.example', sub_role_code: 'revoker' })
  const grants: Array<[string, string, string]> = [
    ['support', 'permission', 'assign'],
    ['support', 'permission', 'revoke'],
    ['support', 'orders', 'read'],
    ['revoker', 'permission', 'revoke'],
    ['revoker', 'orders', 'read'],
  ]
  for (const [role, obj, act] of grants) {
    const res = await roleCommand(ta, 'grant', role, { obj, act })
    if (res.statusCode !== 200) throw new Error(res.body)
  }
  return { ta, m1Owner, m2Owner, c1, c2, m2Clerk, staff, revoker }
}

const apply = (ta: TestApp, changes: unknown[], options: { dry_run?: boolean; token?: string } = {}) =>
  ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/changes',
    token: options.token ?? ta.rootToken,
    body: { command: 'apply-permission-changes', data: { changes, ...(options.dry_run === undefined ? {} : { dry_run: options.dry_run }) } },
  })

const auditCount = async (ta: TestApp) => Number((await ta.service.db.query<{ n: string }>('SELECT count(*)::text AS n FROM permission_audit')).rows[0]?.n)

const check = async (ta: TestApp, user: Account, obj: string, act: string, domain?: string) => {
  const res = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=${obj}&act=${act}&user_id=${user.id}${domain === undefined ? '' : `&domain=${domain}`}` })
  return (res.json() as { data: { allowed: boolean } }).data.allowed
}

/** The answer's response code, the error's fields, and whether anything was written. */
async function refusedWithoutWrites(t: Test, ta: TestApp, send: () => ReturnType<typeof apply>) {
  const before = await fingerprint(ta.service.db)
  const revision = await currentRevision(ta.service.db)
  const res = await send()
  t.same(changedTables(before, await fingerprint(ta.service.db)), [], 'no table changed')
  t.equal(await currentRevision(ta.service.db), revision, 'no revision made')
  const body = res.json() as { response_code: string; errors?: Array<{ field: string }> }
  return { status: res.statusCode, code: body.response_code, fields: (body.errors ?? []).map((e) => e.field) }
}

t.test('a list is written in one revision, each change audited as its own entry', async (t) => {
  const w = await world(t)
  const { ta } = w
  const revision = await currentRevision(ta.service.db)
  const audits = await auditCount(ta)
  const changes: Change[] = [
    { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm1' },
    { kind: 'role_deny', sub_role: 'clerk', obj: 'orders', act: 'cancel', domain: 'm1' },
    { kind: 'user_grant', user_id: w.c1.id, obj: 'payouts', act: 'read', expires_at: new Date(Date.now() + 3_600_000).toISOString() },
    { kind: 'user_deny', user_id: w.c2.id, obj: 'orders', act: 'refund' },
    { kind: 'role_revoke', sub_role: 'support', obj: 'orders', act: 'read' },
    // Nothing to revoke: answered unchanged and not audited, as the single command.
    { kind: 'user_revoke', user_id: w.c1.id, obj: 'customers', act: 'export' },
  ]
  const res = await apply(ta, changes)
  t.equal(res.statusCode, 200, res.body)
  const data = res.json().data as { revision: number; changed: number; results: Array<{ index: number; changed: boolean }> }
  t.equal(data.revision, revision + 1, 'one revision for the whole list')
  t.equal(await currentRevision(ta.service.db), revision + 1)
  t.equal(data.changed, 5)
  t.same(data.results, changes.map((_, index) => ({ index, changed: index !== 5 })))
  t.equal(await auditCount(ta), audits + 5, 'one audit entry per change that changed something')
  const log = await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log?page_size=5' })
  const actions = (log.json().data.items as Array<{ action: string; target_id: string; obj: string; act: string }>).map((e) => `${e.action} ${e.target_id} ${e.obj}:${e.act}`)
  t.same(new Set(actions), new Set([`grant clerk orders:refund`, `deny clerk orders:cancel`, `grant ${w.c1.id} payouts:read`, `deny ${w.c2.id} orders:refund`, 'revoke support orders:read']))
  t.equal(await check(ta, w.c1, 'orders', 'refund'), true, 'the role grant counts')
  t.equal(await check(ta, w.c2, 'orders', 'refund'), false, 'the user deny beats it')
  t.equal(await check(ta, w.c1, 'payouts', 'read'), true)
  t.equal(await check(ta, w.staff, 'orders', 'read'), false, 'the role revoke counts')

  const again = await apply(ta, changes.slice(0, 2))
  t.same(again.json().data, { revision: revision + 1, changed: 0, results: [{ index: 0, changed: false }, { index: 1, changed: false }] }, 'repeating changes nothing and makes no revision')
})

t.test('all or none: a refusal at index 500 writes nothing, no revision, no audit', async (t) => {
  const w = await world(t)
  const { ta } = w
  const changes: Change[] = Array.from({ length: 600 }, (_, i) => ({ kind: 'role_grant', sub_role: `role_${i}`, obj: 'orders', act: 'read', domain: 'm1' }))
  changes[500] = { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'nope', domain: 'm1' }
  const audits = await auditCount(ta)
  const refused = await refusedWithoutWrites(t, ta, () => apply(ta, changes))
  t.same(refused, { status: 400, code: '104', fields: ['changes.500'] }, 'the refusal names its index')
  t.equal(await auditCount(ta), audits)
  t.equal(ta.service.engine.policy.hasPolicy(['role_0', 'm1', 'orders', 'read', 'allow']), false, 'memory untouched too')
})

t.test('each change is refused exactly as its single command refuses it', async (t) => {
  const w = await world(t)
  const { ta } = w
  const staffToken = ta.tokenFor(w.staff)
  const m1Token = ta.tokenFor(w.m1Owner)
  const past = new Date(Date.now() - 60_000).toISOString()
  type Single = () => ReturnType<typeof apply>
  const cases: Array<{ name: string; change: Change; single: Single; token: string }> = [
    {
      name: 'a role grant of a pair the caller lacks',
      change: { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund' },
      single: () => roleCommand(ta, 'grant', 'clerk', { obj: 'orders', act: 'refund' }, staffToken),
      token: staffToken,
    },
    {
      name: 'a role revoke of a pair the caller lacks',
      change: { kind: 'role_revoke', sub_role: 'clerk', obj: 'orders', act: 'refund' },
      single: () => roleCommand(ta, 'revoke', 'clerk', { obj: 'orders', act: 'refund' }, staffToken),
      token: staffToken,
    },
    {
      name: 'a grant to a root sub-role',
      change: { kind: 'role_grant', sub_role: 'super_admin', obj: 'orders', act: 'read' },
      single: () => roleCommand(ta, 'grant', 'super_admin', { obj: 'orders', act: 'read' }),
      token: ta.rootToken,
    },
    {
      name: 'a pair not in the catalog',
      change: { kind: 'role_revoke', sub_role: 'clerk', obj: 'orders', act: 'fly' },
      single: () => roleCommand(ta, 'revoke', 'clerk', { obj: 'orders', act: 'fly' }),
      token: ta.rootToken,
    },
    {
      name: 'a domain that names no merchant',
      change: { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'read', domain: 'm404' },
      single: () => roleCommand(ta, 'grant', 'clerk', { obj: 'orders', act: 'read', domain: 'm404' }),
      token: ta.rootToken,
    },
    {
      name: 'a user grant of a pair the caller lacks',
      change: { kind: 'user_grant', user_id: w.c1.id, obj: 'orders', act: 'refund' },
      single: () => userCommand(ta, 'grant', w.c1, { obj: 'orders', act: 'refund' }, staffToken),
      token: staffToken,
    },
    {
      name: 'an expiry in the past',
      change: { kind: 'user_deny', user_id: w.c1.id, obj: 'orders', act: 'read', expires_at: past },
      single: () => userCommand(ta, 'deny', w.c1, { obj: 'orders', act: 'read', expires_at: past }),
      token: ta.rootToken,
    },
    {
      name: "a merchant user's override outside its merchant",
      change: { kind: 'user_grant', user_id: w.c1.id, obj: 'orders', act: 'read', domain: 'm2' },
      single: () => userCommand(ta, 'grant', w.c1, { obj: 'orders', act: 'read', domain: 'm2' }),
      token: ta.rootToken,
    },
    {
      name: "another merchant's user",
      change: { kind: 'user_revoke', user_id: w.m2Clerk.id, obj: 'orders', act: 'read' },
      single: () => userCommand(ta, 'revoke', w.m2Clerk, { obj: 'orders', act: 'read' }, m1Token),
      token: m1Token,
    },
  ]
  for (const c of cases) {
    const single = await c.single()
    t.not(single.statusCode, 200, `${c.name}: the single command refuses it`)
    // After a change the caller may make, so the refusal is at index 1.
    const first: Change = { kind: 'user_grant', user_id: w.c2.id, obj: 'orders', act: 'read', domain: 'm1' }
    const refused = await refusedWithoutWrites(t, ta, () => apply(ta, [first, c.change], { token: c.token }))
    t.same(refused, { status: single.statusCode, code: single.json().response_code, fields: ['changes.1'] }, c.name)
  }
})

t.test('a change sees the changes before it in the list', async (t) => {
  const w = await world(t)
  const { ta } = w
  // staff holds orders:read through its role; revoking it first leaves it nothing to hand out.
  const changes: Change[] = [
    { kind: 'role_revoke', sub_role: 'support', obj: 'orders', act: 'read' },
    { kind: 'user_grant', user_id: w.c1.id, obj: 'orders', act: 'read' },
  ]
  const refused = await refusedWithoutWrites(t, ta, () => apply(ta, changes, { token: ta.tokenFor(w.staff) }))
  t.same(refused, { status: 403, code: '302', fields: ['changes.1'] })
  const reversed = await apply(ta, [...changes].reverse(), { token: ta.tokenFor(w.staff) })
  t.equal(reversed.statusCode, 200, 'in the other order each change is allowed')
})

t.test('duplicates and contradictions inside one list are refused with their own codes', async (t) => {
  const w = await world(t)
  const { ta } = w
  const grant: Change = { kind: 'user_grant', user_id: w.c1.id, obj: 'orders', act: 'refund' }
  const duplicate = await refusedWithoutWrites(t, ta, () => apply(ta, [grant, { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund' }, grant]))
  t.same(duplicate, { status: 400, code: '120', fields: ['changes.2'] })
  // The user's default domain is its merchant: naming it changes nothing about which row it is.
  const contradiction = await refusedWithoutWrites(t, ta, () => apply(ta, [grant, { kind: 'user_revoke', user_id: w.c1.id, obj: 'orders', act: 'refund', domain: 'm1' }]))
  t.same(contradiction, { status: 400, code: '121', fields: ['changes.1'] })
  const roleContradiction = await refusedWithoutWrites(t, ta, () =>
    apply(ta, [
      { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm1' },
      { kind: 'role_deny', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm1' },
    ]),
  )
  t.same(roleContradiction, { status: 400, code: '121', fields: ['changes.1'] })
  const otherDomain = await apply(ta, [
    { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm1' },
    { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm2' },
  ])
  t.equal(otherDomain.statusCode, 200, 'the same pair in two domains is two changes')
})

t.test("a merchant caller's list: its own merchant only", async (t) => {
  const w = await world(t)
  const { ta } = w
  const token = ta.tokenFor(w.m1Owner)
  const refused = await refusedWithoutWrites(t, ta, () =>
    apply(ta, [{ kind: 'user_grant', user_id: w.c1.id, obj: 'orders', act: 'refund' }, { kind: 'user_grant', user_id: w.m2Clerk.id, obj: 'orders', act: 'refund' }], { token }),
  )
  t.same(refused, { status: 404, code: '401', fields: ['changes.1'] }, "another merchant's user is not found")
  const forced = await apply(ta, [{ kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm2' }], { token })
  t.equal(forced.statusCode, 200, forced.body)
  t.equal(ta.service.engine.policy.hasPolicy(['clerk', 'm1', 'orders', 'refund', 'allow']), true, 'a role change is forced to its merchant')
  t.equal(ta.service.engine.policy.hasPolicy(['clerk', 'm2', 'orders', 'refund', 'allow']), false)
})

t.test('the bound and the shape: at most 1,000 changes, each with its kind\'s fields', async (t) => {
  const w = await world(t)
  const { ta } = w
  const change = (i: number): Change => ({ kind: 'role_grant', sub_role: `role_${i}`, obj: 'orders', act: 'read', domain: 'm1' })
  const tooMany = await refusedWithoutWrites(t, ta, () => apply(ta, Array.from({ length: 1001 }, (_, i) => change(i))))
  t.same(tooMany, { status: 400, code: '100', fields: ['changes'] }, '1,001 changes')
  const full = await apply(ta, Array.from({ length: 1000 }, (_, i) => change(i)))
  t.equal(full.statusCode, 200, '1,000 changes pass')
  t.equal(full.json().data.changed, 1000)
  const missing = await refusedWithoutWrites(t, ta, () => apply(ta, [{ kind: 'user_grant', sub_role: 'clerk', obj: 'orders', act: 'read' }]))
  t.same(missing, { status: 400, code: '100', fields: ['changes.0.user_id', 'changes.0.sub_role'] }, 'a user kind names a user, not a sub-role')
  const expiring = await refusedWithoutWrites(t, ta, () => apply(ta, [{ ...change(1), expires_at: new Date(Date.now() + 60_000).toISOString() }]))
  t.same(expiring, { status: 400, code: '100', fields: ['changes.0.expires_at'] }, 'role rows never expire')
})

t.test('the route asks for what each kind present needs', async (t) => {
  const w = await world(t)
  const { ta } = w
  const token = ta.tokenFor(w.revoker)
  const revokeOnly = await apply(ta, [{ kind: 'user_revoke', user_id: w.c1.id, obj: 'orders', act: 'read' }], { token })
  t.equal(revokeOnly.statusCode, 200, 'permission:revoke is enough for revokes')
  const withGrant = await refusedWithoutWrites(t, ta, () =>
    apply(ta, [{ kind: 'user_revoke', user_id: w.c1.id, obj: 'orders', act: 'read' }, { kind: 'user_grant', user_id: w.c1.id, obj: 'orders', act: 'read', domain: 'global' }], { token }),
  )
  t.same(withGrant, { status: 403, code: '300', fields: [] }, 'a grant in the list needs permission:assign')
  const neither = await refusedWithoutWrites(t, ta, () => apply(ta, [{ kind: 'user_revoke', user_id: w.c1.id, obj: 'orders', act: 'read' }], { token: ta.tokenFor(w.c1) }))
  t.same(neither, { status: 403, code: '300', fields: [] }, 'a caller with neither is stopped by the guard')
})

t.test('a dry run writes nothing and names who gains and who loses what', async (t) => {
  const w = await world(t)
  const { ta } = w
  await userCommand(ta, 'grant', w.c2, { obj: 'orders', act: 'cancel' })
  const changes: Change[] = [
    { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'm1' },
    { kind: 'user_deny', user_id: w.c2.id, obj: 'orders', act: 'refund' },
    { kind: 'user_revoke', user_id: w.c2.id, obj: 'orders', act: 'cancel' },
  ]
  const before = await fingerprint(ta.service.db)
  const revision = await currentRevision(ta.service.db)
  const res = await apply(ta, changes, { dry_run: true })
  t.equal(res.statusCode, 200, res.body)
  t.same(changedTables(before, await fingerprint(ta.service.db)), [], 'nothing written')
  const data = res.json().data
  t.equal(data.revision, revision)
  t.same(data.results, [{ index: 0, changed: true }, { index: 1, changed: true }, { index: 2, changed: true }])
  t.same(data.preview, {
    users_gaining: 1,
    users_losing: 1,
    sample: [
      { user_id: w.c1.id, email: 'c1@m1.example', gains: [{ obj: 'orders', act: 'refund', domain: 'm1' }], loses: [] },
      // The role grant and the deny of the same pair net out: c2 gains nothing and loses only what was revoked.
      { user_id: w.c2.id, email: 'c2@m1.example', gains: [], loses: [{ obj: 'orders', act: 'cancel', domain: 'm1' }] },
    ],
  })
  t.equal(await check(ta, w.c1, 'orders', 'refund'), false, 'nothing applied')
})
