/**
 * Access review over HTTP: who holds a pair (paging, merchant callers forced
 * to their merchant, the permission it needs), why a check answered as it
 * did (every reason kind), and dry runs of the five grant, deny and revoke
 * commands (nothing written, audited or counted as a revision; who would
 * gain or lose the pair; refused exactly as the command itself). Run on the
 * shipped model (the decision index) and on an equivalent model written
 * differently (Casbin's enforce() with a cache).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { Account } from '../../src/domain/principals.js'
import { insertRule } from '../../src/storage/policyRows.js'
import { buildTestApp, buildTestService, onboard, register, tempDir, type TestApp } from '../helper.js'
import { cheapPasswords, changedTables, fingerprint } from '../support/security.js'

interface Holder {
  user_id: string
  email: string
  sub_role_code: string
  via: 'root' | 'role' | 'user'
}
interface HoldersPage {
  domain: string
  items: Holder[]
  page: number
  page_size: number
  total: number
}
interface PreviewUser {
  user_id: string
  email: string
  gains: Array<{ obj: string; act: string; domain: string }>
  loses: Array<{ obj: string; act: string; domain: string }>
}
interface Preview {
  users_gaining: number
  users_losing: number
  sample: PreviewUser[]
}

interface World {
  ta: TestApp
  m1Owner: Account
  m2Owner: Account
  /** clerk in m1: holds orders:read through the role's global grant. */
  c1: Account
  /** clerk in m1 with a deny of orders:read. */
  c2: Account
  /** clerk in m1, deactivated. */
  c3: Account
  m2Clerk: Account
  /** support, system owner: holds orders:read through the role's global grant. */
  staff: Account
  /** support, system owner, with an allow of customers:export in m1. */
  staff2: Account
  /** reviewer, system owner: permission:read and no orders pair. */
  reviewer: Account
  /** m1 reviewer: permission:read in m1. */
  m1Reviewer: Account
}

const holders = (ta: TestApp, query: string, token: string | null = ta.rootToken) => ta.call({ method: 'GET', url: `/v2/admin/permissions/holders?${query}`, token })
const pageOf = (res: { json(): unknown }) => (res.json() as { data: HoldersPage }).data

async function world(t: Test, env: Record<string, string> = {}): Promise<World> {
  const ta = await buildTestApp(t, { service: await buildTestService(t, { env, passwords: cheapPasswords() }) })
  const m1Owner = await onboard(ta, 'm1')
  const m2Owner = await onboard(ta, 'm2')
  const c1 = await register(ta, { email: 'c1@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const c2 = await register(ta, { email: 'c2@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const c3 = await register(ta, { email: 'c3@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  const m2Clerk = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk', merchant_id: 'm2' })
  const staff = await register(ta, { email: 'staff@platform.example', sub_role_code: 'support' })
  const staff2 = await register(ta, { email: 'staff2@platform.example', sub_role_code: 'support' })
  const reviewer = await register(ta, { email: 'reviewer@platform.example', sub_role_code: 'reviewer' })
  const m1Reviewer = await register(ta, { email: 'reviewer@m1.example', sub_role_code: 'mreviewer', merchant_id: 'm1' })
  const ok = async (method: 'POST' | 'DELETE', url: string, command: string, data: Record<string, unknown>) => {
    const res = await ta.call({ method, url, body: { command, data } })
    if (res.statusCode !== 200) throw new Error(`${command}: ${res.statusCode} ${res.body}`)
  }
  await ok('POST', '/v2/admin/permissions/roles/clerk/grant', 'grant-role-permission', { obj: 'orders', act: 'read' })
  await ok('POST', '/v2/admin/permissions/roles/clerk/grant', 'grant-role-permission', { obj: 'orders', act: 'refund', domain: 'm1' })
  await ok('POST', '/v2/admin/permissions/roles/support/grant', 'grant-role-permission', { obj: 'orders', act: 'read' })
  await ok('POST', '/v2/admin/permissions/roles/reviewer/grant', 'grant-role-permission', { obj: 'permission', act: 'read' })
  await ok('POST', '/v2/admin/permissions/roles/mreviewer/grant', 'grant-role-permission', { obj: 'permission', act: 'read', domain: 'm1' })
  await ok('POST', `/v2/admin/permissions/users/${c2.id}/deny`, 'deny-user-permission', { obj: 'orders', act: 'read' })
  await ok('POST', `/v2/admin/permissions/users/${staff2.id}/grant`, 'grant-user-permission', { obj: 'customers', act: 'export', domain: 'm1' })
  const off = await ta.call({ method: 'POST', url: `/v2/admin/accounts/${c3.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })
  if (off.statusCode !== 200) throw new Error(`deactivate: ${off.body}`)
  return { ta, m1Owner, m2Owner, c1, c2, c3, m2Clerk, staff, staff2, reviewer, m1Reviewer }
}

/** Every account of the world a check allows the pair in the domain, asked one check at a time. */
async function checkedHolders(w: World, obj: string, act: string, domain: string): Promise<string[]> {
  const everyone = [w.ta.root, w.m1Owner, w.m2Owner, w.c1, w.c2, w.c3, w.m2Clerk, w.staff, w.staff2, w.reviewer, w.m1Reviewer]
  const allowed: string[] = []
  for (const user of everyone) {
    const res = await w.ta.call({ method: 'GET', url: `/v2/authz/check?obj=${obj}&act=${act}&domain=${domain}&user_id=${user.id}` })
    if ((res.json() as { data: { allowed: boolean } }).data.allowed) allowed.push(user.id)
  }
  return allowed.sort()
}

async function accessReview(t: Test, env: Record<string, string>): Promise<void> {
  const w = await world(t, env)
  const { ta } = w

  t.test('holders: exactly the users a check allows, by e-mail, with how they hold it', async (t) => {
    for (const [obj, act, domain] of [
      ['orders', 'read', 'm1'],
      ['orders', 'read', 'global'],
      ['orders', 'refund', 'm1'],
      ['orders', 'read', 'm2'],
      ['customers', 'export', 'm1'],
      ['payouts', 'approve', 'm2'],
    ] as const) {
      const res = await holders(ta, `obj=${obj}&act=${act}&domain=${domain}&page_size=100`)
      t.equal(res.statusCode, 200)
      const page = pageOf(res)
      t.same(page.items.map((h) => h.user_id).sort(), await checkedHolders(w, obj, act, domain), `${obj}:${act} in ${domain}`)
      t.equal(page.total, page.items.length)
      t.same(page.items.map((h) => h.email), [...page.items.map((h) => h.email)].sort(), 'by e-mail')
    }
    const m1 = pageOf(await holders(ta, 'obj=orders&act=read&domain=m1&page_size=100')).items
    const via = Object.fromEntries(m1.map((h) => [h.email, h.via]))
    t.same(via, {
      'c1@m1.example': 'role',
      'owner@m1.example': 'root',
      'root@example.com': 'root',
      'staff2@platform.example': 'role',
      'staff@platform.example': 'role',
    })
    t.notOk(m1.some((h) => h.user_id === w.c2.id), 'a deny beats the role grant')
    t.notOk(m1.some((h) => h.user_id === w.c3.id), 'a deactivated account holds nothing')
    const exported = pageOf(await holders(ta, 'obj=customers&act=export&domain=m1')).items
    t.same(
      exported.map((h) => [h.email, h.via, h.sub_role_code]),
      [
        ['owner@m1.example', 'root', 'super_admin'],
        ['root@example.com', 'root', 'super_admin'],
        ['staff2@platform.example', 'user', 'support'],
      ],
    )
    const fallback = pageOf(await holders(ta, 'obj=orders&act=read'))
    t.equal(fallback.domain, 'global', 'the domain defaults to global')
    t.same(fallback.items.map((h) => h.email), ['root@example.com', 'staff2@platform.example', 'staff@platform.example'])
    const unknown = pageOf(await holders(ta, 'obj=unknown&act=thing&domain=m1'))
    t.same([unknown.items, unknown.total], [[], 0], 'a pair outside the catalog: nobody')
  })

  t.test('holders: pages', async (t) => {
    const all = pageOf(await holders(ta, 'obj=orders&act=read&domain=m1&page_size=100')).items
    t.equal(all.length, 5)
    const seen: Holder[] = []
    for (let page = 1; page <= 3; page++) {
      const res = pageOf(await holders(ta, `obj=orders&act=read&domain=m1&page=${page}&page_size=2`))
      t.same([res.page, res.page_size, res.total], [page, 2, 5])
      seen.push(...res.items)
    }
    t.same(seen, all, 'pages follow one another in order')
    const beyond = pageOf(await holders(ta, 'obj=orders&act=read&domain=m1&page=9&page_size=2'))
    t.same([beyond.items, beyond.total], [[], 5])
    t.equal(pageOf(await holders(ta, 'obj=orders&act=read&domain=m1')).page_size, 20, 'twenty by default')
    for (const bad of ['page=0', 'page_size=101', 'page_size=0']) {
      const res = await holders(ta, `obj=orders&act=read&${bad}`)
      t.equal(res.statusCode, 400, bad)
    }
  })

  t.test('holders: the list follows every change', async (t) => {
    const emails = async () => pageOf(await holders(ta, 'obj=orders&act=cancel&domain=m1')).items.map((h) => h.email)
    t.same(await emails(), ['owner@m1.example', 'root@example.com'])
    const grant = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'cancel', domain: 'm1' } },
    })
    t.equal(grant.statusCode, 200)
    t.same(await emails(), ['c1@m1.example', 'c2@m1.example', 'owner@m1.example', 'root@example.com'])
    await ta.call({ method: 'POST', url: `/v2/admin/accounts/${w.c2.id}/deactivate`, body: { command: 'deactivate-admin', data: {} } })
    t.same(await emails(), ['c1@m1.example', 'owner@m1.example', 'root@example.com'], 'a deactivation')
    await ta.call({ method: 'POST', url: `/v2/admin/accounts/${w.c2.id}/reactivate`, body: { command: 'reactivate-admin', data: {} } })
    await ta.call({
      method: 'DELETE',
      url: '/v2/admin/permissions/roles/clerk/revoke',
      body: { command: 'revoke-role-permission', data: { obj: 'orders', act: 'cancel', domain: 'm1' } },
    })
    t.same(await emails(), ['owner@m1.example', 'root@example.com'])
  })

  t.test('holders: merchant callers get their merchant and its users only; permission:read is needed', async (t) => {
    const res = pageOf(await holders(ta, 'obj=orders&act=read&domain=m2&page_size=100', ta.tokenFor(w.m1Owner)))
    t.equal(res.domain, 'm1', 'forced to its merchant')
    t.same(res.items.map((h) => h.email), ['c1@m1.example', 'owner@m1.example'], 'no platform staff, no other merchant')
    t.equal(res.total, 2)
    const reviewer = pageOf(await holders(ta, 'obj=orders&act=read&page_size=100', ta.tokenFor(w.m1Reviewer)))
    t.same([reviewer.domain, reviewer.total], ['m1', 2])
    for (const [who, token] of [
      ['m1 clerk', ta.tokenFor(w.c1)],
      ['platform staff', ta.tokenFor(w.staff)],
    ] as const) {
      const refused = await holders(ta, 'obj=orders&act=read', token)
      t.same([refused.statusCode, (refused.json() as { response_code: string }).response_code], [403, '300'], who)
    }
    const anonymous = await holders(ta, 'obj=orders&act=read', null)
    t.equal(anonymous.statusCode, 401)
    const nowhere = await holders(ta, 'obj=orders&act=read&domain=m404')
    t.same([nowhere.statusCode, (nowhere.json() as { response_code: string }).response_code], [404, '402'])
  })

  t.test('explain: every kind, agreeing with allowed', async (t) => {
    // A role's deny, as another tool might write it (the API grants roles allows only).
    const roleDeny = ['clerk', 'm1', 'orders', 'refund', 'deny']
    await insertRule(ta.service.db, 'p', roleDeny)
    await ta.service.engine.addRule('p', roleDeny)
    const explain = async (query: string, token = ta.rootToken) => {
      const res = await ta.call({ method: 'GET', url: `/v2/authz/check?${query}&explain=true`, token })
      t.equal(res.statusCode, 200, query)
      const data = (res.json() as { data: { allowed: boolean; reason: { kind: string; rule?: string[] } } }).data
      const plain = await ta.call({ method: 'GET', url: `/v2/authz/check?${query}`, token })
      t.equal(data.allowed, (plain.json() as { data: { allowed: boolean } }).data.allowed, `${query}: the same answer as without explain`)
      t.equal(['root', 'role', 'user_allow'].includes(data.reason.kind), data.allowed, `${query}: ${data.reason.kind} goes with allowed ${data.allowed}`)
      return data
    }
    t.same(await explain('obj=orders&act=refund'), { allowed: true, reason: { kind: 'root' } })
    t.same(await explain(`obj=orders&act=read&user_id=${w.c1.id}`), { allowed: true, reason: { kind: 'role', rule: ['clerk', 'global', 'orders', 'read', 'allow'] } })
    t.same(await explain(`obj=orders&act=read&domain=m7&user_id=${w.staff.id}`), {
      allowed: true,
      reason: { kind: 'role', rule: ['support', 'global', 'orders', 'read', 'allow'] },
    })
    t.same(await explain(`obj=customers&act=export&domain=m1&user_id=${w.staff2.id}`), {
      allowed: true,
      reason: { kind: 'user_allow', rule: [w.staff2.id, 'm1', 'customers', 'export', 'allow'] },
    })
    t.same(await explain(`obj=orders&act=read&user_id=${w.c2.id}`), { allowed: false, reason: { kind: 'user_deny', rule: [w.c2.id, 'm1', 'orders', 'read', 'deny'] } })
    t.same(await explain(`obj=orders&act=refund&user_id=${w.c1.id}`), { allowed: false, reason: { kind: 'role_deny', rule: roleDeny } })
    t.same(await explain(`obj=payouts&act=approve&user_id=${w.c1.id}`), { allowed: false, reason: { kind: 'none' } })
    t.same(await explain(`obj=unknown&act=thing&user_id=${w.c1.id}`), { allowed: false, reason: { kind: 'not_in_catalog' } })
    t.same(await explain(`obj=orders&act=read&domain=m2&user_id=${w.c1.id}`), { allowed: false, reason: { kind: 'outside_home_domain' } })
    t.same(await explain(`obj=orders&act=read&user_id=${w.c3.id}`), { allowed: false, reason: { kind: 'none' } }, 'a deactivated account')
    t.same(await explain(`obj=orders&act=read&user_id=${w.c1.id}`, ta.tokenFor(w.m1Reviewer)), {
      allowed: true,
      reason: { kind: 'role', rule: ['clerk', 'global', 'orders', 'read', 'allow'] },
    })
    t.same(await explain('obj=orders&act=read', ta.tokenFor(w.reviewer)), { allowed: false, reason: { kind: 'none' } }, 'about oneself, with permission:read')

    const own = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read&explain=true', token: ta.tokenFor(w.c1) })
    t.same([own.statusCode, (own.json() as { response_code: string }).response_code], [403, '300'], 'explaining needs permission:read, even about oneself')
    const plain = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read', token: ta.tokenFor(w.c1) })
    t.same(plain.json(), { response_code: '001', response_text: 'Success', data: { allowed: true } }, 'without explain: no reason')
    const falseExplain = await ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read&explain=false', token: ta.tokenFor(w.c1) })
    t.same((falseExplain.json() as { data: unknown }).data, { allowed: true })
    const foreign = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&explain=true&user_id=${w.m2Clerk.id}`, token: ta.tokenFor(w.m1Reviewer) })
    t.same([foreign.statusCode, (foreign.json() as { response_code: string }).response_code], [404, '401'], 'a user out of reach')

    const batch = await ta.call({
      method: 'POST',
      url: '/v2/authz/check-batch',
      body: {
        command: 'check-batch',
        data: {
          user_id: w.c1.id,
          explain: true,
          checks: [
            { obj: 'orders', act: 'read' },
            { obj: 'orders', act: 'refund' },
            { obj: 'orders', act: 'read', domain: 'm2' },
          ],
        },
      },
    })
    t.same((batch.json() as { data: unknown }).data, {
      results: [
        { obj: 'orders', act: 'read', domain: 'm1', allowed: true, reason: { kind: 'role', rule: ['clerk', 'global', 'orders', 'read', 'allow'] } },
        { obj: 'orders', act: 'refund', domain: 'm1', allowed: false, reason: { kind: 'role_deny', rule: roleDeny } },
        { obj: 'orders', act: 'read', domain: 'm2', allowed: false, reason: { kind: 'outside_home_domain' } },
      ],
    })
    const batchOwn = await ta.call({
      method: 'POST',
      url: '/v2/authz/check-batch',
      token: ta.tokenFor(w.c1),
      body: { command: 'check-batch', data: { explain: true, checks: [{ obj: 'orders', act: 'read' }] } },
    })
    t.equal(batchOwn.statusCode, 403, 'the batch too')
    await ta.service.engine.removeRule('p', roleDeny)
    await ta.service.db.query("DELETE FROM casbin_rule WHERE ptype = 'p' AND v0 = 'clerk' AND v4 = 'deny'")
  })

  t.test('dry runs: the same checks, nothing written, who would gain or lose', async (t) => {
    const command = (verb: 'grant' | 'deny' | 'revoke', target: string, data: Record<string, unknown>, token = ta.rootToken) => {
      const role = !target.includes('-')
      const url = role ? `/v2/admin/permissions/roles/${target}/${verb}` : `/v2/admin/permissions/users/${target}/${verb}`
      const name = `${verb}-${role ? 'role' : 'user'}-permission`
      return ta.call({ method: verb === 'revoke' ? 'DELETE' : 'POST', url, token, body: { command: name, data } })
    }
    /** A dry run: nothing changes in any table, the revision stays, and no decision moves. */
    const dryRun = async (label: string, verb: 'grant' | 'deny' | 'revoke', target: string, data: Record<string, unknown>, token = ta.rootToken) => {
      const before = await fingerprint(ta.service.db)
      const holdersBefore = pageOf(await holders(ta, `obj=${String(data.obj)}&act=${String(data.act)}&domain=${String(data.domain ?? 'm1')}&page_size=100`))
      const res = await command(verb, target, { ...data, dry_run: true }, token)
      t.same(changedTables(before, await fingerprint(ta.service.db)), [], `${label}: nothing written, audited or counted`)
      const holdersAfter = pageOf(await holders(ta, `obj=${String(data.obj)}&act=${String(data.act)}&domain=${String(data.domain ?? 'm1')}&page_size=100`))
      t.same(holdersAfter, holdersBefore, `${label}: no decision moved`)
      return res
    }
    const previewOf = (res: { json(): unknown }) => (res.json() as { data: { preview: Preview } }).data.preview
    const revision = Number((await ta.call({ method: 'GET', url: '/v2/profile' })).headers['x-policy-revision'])
    const auditTotal = async () => (((await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log' })).json()) as { data: { total: number } }).data.total
    const audited = await auditTotal()

    const grant = await dryRun('grant a role in m1', 'grant', 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    t.equal(grant.statusCode, 200)
    t.match((grant.json() as { data: unknown }).data, { changed: true, revision, sub_role_code: 'clerk', obj: 'orders', act: 'cancel', domain: 'm1' })
    t.same(previewOf(grant), {
      users_gaining: 2,
      users_losing: 0,
      sample: [
        { user_id: w.c1.id, email: 'c1@m1.example', gains: [{ obj: 'orders', act: 'cancel', domain: 'm1' }], loses: [] },
        { user_id: w.c2.id, email: 'c2@m1.example', gains: [{ obj: 'orders', act: 'cancel', domain: 'm1' }], loses: [] },
      ],
    })

    const global = await dryRun('grant a role in global', 'grant', 'clerk', { obj: 'payouts', act: 'read', domain: 'global' })
    t.same(previewOf(global), {
      users_gaining: 3,
      users_losing: 0,
      sample: [
        { user_id: w.c1.id, email: 'c1@m1.example', gains: [{ obj: 'payouts', act: 'read', domain: 'm1' }], loses: [] },
        { user_id: w.c2.id, email: 'c2@m1.example', gains: [{ obj: 'payouts', act: 'read', domain: 'm1' }], loses: [] },
        { user_id: w.m2Clerk.id, email: 'clerk@m2.example', gains: [{ obj: 'payouts', act: 'read', domain: 'm2' }], loses: [] },
      ],
    }, "a global grant: merchant users in their merchant")

    const held = await dryRun('grant what the role holds', 'grant', 'clerk', { obj: 'orders', act: 'read', domain: 'global' })
    t.match((held.json() as { data: unknown }).data, { changed: false, preview: { users_gaining: 0, users_losing: 0, sample: [] } })

    const revoke = await dryRun('revoke a role', 'revoke', 'clerk', { obj: 'orders', act: 'read', domain: 'global' })
    t.equal(revoke.statusCode, 200)
    t.same(previewOf(revoke), {
      users_gaining: 0,
      users_losing: 2,
      sample: [
        { user_id: w.c1.id, email: 'c1@m1.example', gains: [], loses: [{ obj: 'orders', act: 'read', domain: 'm1' }] },
        { user_id: w.m2Clerk.id, email: 'clerk@m2.example', gains: [], loses: [{ obj: 'orders', act: 'read', domain: 'm2' }] },
      ],
    }, 'c2 is denied already')
    const staffRevoke = await dryRun('revoke a platform role', 'revoke', 'support', { obj: 'orders', act: 'read', domain: 'global' })
    t.same(previewOf(staffRevoke).sample.map((u) => [u.email, u.loses]), [
      ['staff2@platform.example', [{ obj: 'orders', act: 'read', domain: 'global' }]],
      ['staff@platform.example', [{ obj: 'orders', act: 'read', domain: 'global' }]],
    ])

    const allow = await dryRun('grant a user', 'grant', w.c2.id, { obj: 'orders', act: 'read', domain: 'm1' })
    t.match((allow.json() as { data: unknown }).data, { changed: true, user_id: w.c2.id, effect: 'allow', domain: 'm1' })
    t.same(previewOf(allow), {
      users_gaining: 1,
      users_losing: 0,
      sample: [{ user_id: w.c2.id, email: 'c2@m1.example', gains: [{ obj: 'orders', act: 'read', domain: 'm1' }], loses: [] }],
    }, 'an allow in place of a deny')
    const deny = await dryRun('deny a user', 'deny', w.c1.id, { obj: 'orders', act: 'read', domain: 'm1' })
    t.same(previewOf(deny), {
      users_gaining: 0,
      users_losing: 1,
      sample: [{ user_id: w.c1.id, email: 'c1@m1.example', gains: [], loses: [{ obj: 'orders', act: 'read', domain: 'm1' }] }],
    })
    const lift = await dryRun('revoke a user override', 'revoke', w.c2.id, { obj: 'orders', act: 'read', domain: 'm1' })
    t.match((lift.json() as { data: unknown }).data, { changed: true, effect: null })
    t.same(previewOf(lift).users_gaining, 1, 'lifting the deny gives back the role grant')
    const nothing = await dryRun('revoke an override that is not there', 'revoke', w.c1.id, { obj: 'orders', act: 'read', domain: 'm1' })
    t.match((nothing.json() as { data: unknown }).data, { changed: false, preview: { users_gaining: 0, users_losing: 0, sample: [] } })
    const same = await dryRun('deny what is denied', 'deny', w.c2.id, { obj: 'orders', act: 'read', domain: 'm1' })
    t.match((same.json() as { data: unknown }).data, { changed: false, preview: { users_gaining: 0, users_losing: 0 } })

    const after = Number((await ta.call({ method: 'GET', url: '/v2/profile' })).headers['x-policy-revision'])
    t.equal(after, revision, 'no revision was used')
    t.equal(await auditTotal(), audited, 'no audit entry')
    const real = await command('grant', 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
    t.equal((real.json() as { data: { revision: number } }).data.revision, revision + 1, 'the real command still writes')
    t.notOk('preview' in (real.json() as { data: object }).data, 'and answers without a preview')
    await command('revoke', 'clerk', { obj: 'orders', act: 'cancel', domain: 'm1' })
  })

  t.test('dry runs are refused exactly as the commands', async (t) => {
    // m1's reviewer holds permission:assign and permission:revoke in m1, nothing of the orders pairs.
    const rules = [
      ['mreviewer', 'm1', 'permission', 'assign', 'allow'],
      ['mreviewer', 'm1', 'permission', 'revoke', 'allow'],
    ]
    for (const rule of rules) {
      await insertRule(ta.service.db, 'p', rule)
      await ta.service.engine.addRule('p', rule)
    }
    const reviewer = ta.tokenFor(w.m1Reviewer)
    const cases: Array<[string, 'POST' | 'DELETE', string, string, Record<string, unknown>, string?]> = [
      ['a root role', 'POST', '/v2/admin/permissions/roles/super_admin/grant', 'grant-role-permission', { obj: 'orders', act: 'read' }],
      ['a pair outside the catalog', 'POST', '/v2/admin/permissions/roles/clerk/grant', 'grant-role-permission', { obj: 'unknown', act: 'thing' }],
      ['an unknown merchant', 'POST', '/v2/admin/permissions/roles/clerk/grant', 'grant-role-permission', { obj: 'orders', act: 'read', domain: 'm404' }],
      ['beyond the caller', 'POST', '/v2/admin/permissions/roles/clerk/grant', 'grant-role-permission', { obj: 'orders', act: 'cancel' }, reviewer],
      ['revoke beyond the caller', 'DELETE', '/v2/admin/permissions/roles/clerk/revoke', 'revoke-role-permission', { obj: 'orders', act: 'read' }, reviewer],
      ['a user out of reach', 'POST', `/v2/admin/permissions/users/${w.m2Clerk.id}/grant`, 'grant-user-permission', { obj: 'orders', act: 'read' }, reviewer],
      ['outside the home domain', 'POST', `/v2/admin/permissions/users/${w.c1.id}/deny`, 'deny-user-permission', { obj: 'orders', act: 'read', domain: 'm2' }],
      ['a root user', 'POST', `/v2/admin/permissions/users/${w.m1Owner.id}/deny`, 'deny-user-permission', { obj: 'orders', act: 'read' }],
      ['revoke beyond the caller', 'DELETE', `/v2/admin/permissions/users/${w.c2.id}/revoke`, 'revoke-user-permission', { obj: 'orders', act: 'read' }, reviewer],
      ['no permission:assign', 'POST', `/v2/admin/permissions/users/${w.c1.id}/grant`, 'grant-user-permission', { obj: 'orders', act: 'read' }, ta.tokenFor(w.c1)],
      ['a dry run that is not a boolean', 'POST', '/v2/admin/permissions/roles/clerk/grant', 'grant-role-permission', { obj: 'orders', act: 'read', dry_run: 'yes' }],
    ]
    for (const [label, method, url, name, data, token = ta.rootToken] of cases) {
      const before = await fingerprint(ta.service.db)
      const dry = await ta.call({ method, url, token, body: { command: name, data: { dry_run: true, ...data } } })
      const wet = await ta.call({ method, url, token, body: { command: name, data } })
      const code = (res: { statusCode: number; json(): unknown }) => [res.statusCode, (res.json() as { response_code: string }).response_code]
      t.ok(dry.statusCode >= 400, `${label}: refused (${dry.statusCode})`)
      t.same(code(dry), code(wet), `${label}: the dry run is refused as the command is`)
      t.same(changedTables(before, await fingerprint(ta.service.db)), [], `${label}: nothing written`)
    }
  })

  t.test('a preview lists fifty users at most, by e-mail, and counts them all', async (t) => {
    for (let i = 0; i < 53; i++) await register(ta, { email: `bulk${String(i).padStart(2, '0')}@m2.example`, sub_role_code: 'bulk', merchant_id: 'm2' })
    const res = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/bulk/grant',
      body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm2', dry_run: true } },
    })
    const preview = (res.json() as { data: { preview: Preview } }).data.preview
    t.equal(preview.users_gaining, 53)
    t.equal(preview.sample.length, 50)
    t.same(
      preview.sample.map((u) => u.email),
      Array.from({ length: 50 }, (_, i) => `bulk${String(i).padStart(2, '0')}@m2.example`),
    )
  })
}

t.test('shipped model: the decision index', (t) => accessReview(t, {}))

t.test('an equivalent model written differently: Casbin enforce() and enforceEx()', async (t) => {
  const dir = tempDir(t, 'model-')
  const shipped = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
  const swapped = shipped.replace(
    /m = r\.obj == p\.obj && r\.act == p\.act && \\\n\s*\(\((g\(r\.sub, p\.sub, r\.dom\) && \(p\.dom == r\.dom \|\| p\.dom == "global"\))\) \|\| \\\n\s*\((g\(r\.sub, p\.sub, "global"\) && p\.dom == "global")\)\)/,
    'm = r.obj == p.obj && r.act == p.act && (($2) || ($1))',
  )
  t.not(swapped, shipped, 'the model was rewritten')
  writeFileSync(join(dir, 'model.conf'), swapped)
  await accessReview(t, { MODEL_PATH: join(dir, 'model.conf') })
})
