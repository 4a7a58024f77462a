import t from 'tap'
import { buildTestApp, onboard, register } from '../helper.js'

t.test('get-permission-audit', async (t) => {
  const ta = await buildTestApp(t)
  const m1 = await onboard(ta, 'm1')
  const m2 = await onboard(ta, 'm2')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(m1))
  const grant = (role: string, data: Record<string, unknown>, token = ta.rootToken) =>
    ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, token, body: { command: 'grant-role-permission', data } })
  await grant('clerk', { obj: 'orders', act: 'read' }, ta.tokenFor(m1))
  await grant('clerk', { obj: 'orders', act: 'read' }, ta.tokenFor(m2))
  await grant('support', { obj: 'orders', act: 'read' })
  await ta.call({
    method: 'POST',
    url: `/v2/admin/permissions/users/${clerk.id}/deny`,
    token: ta.tokenFor(m1),
    body: { command: 'deny-user-permission', data: { obj: 'orders', act: 'read' } },
  })
  const list = async (query: string, token = ta.rootToken) => {
    const res = await ta.call({ method: 'GET', url: `/v2/admin/permissions/audit-log${query}`, token })
    return { status: res.statusCode, body: res.json() }
  }

  t.test('newest first, default paging, entry shape', async (t) => {
    const { status, body } = await list('')
    t.equal(status, 200)
    t.equal(body.data.page, 1)
    t.equal(body.data.page_size, 20)
    t.ok(body.data.total >= 23, 'catalog events, registrations, onboarding and grants')
    const items = body.data.items as Array<Record<string, unknown>>
    t.equal(items.length, 20)
    t.same(Object.keys(items[0] ?? {}).sort(), ['act', 'action', 'actor_email', 'actor_id', 'actor_name', 'actor_type', 'created_at', 'domain', 'id', 'ip', 'obj', 'target_email', 'target_id', 'target_name', 'target_type'])
    const ids = items.map((i) => i.id as number)
    t.same(ids, [...ids].sort((a, b) => b - a), 'newest first')
    t.match(items[0], { action: 'deny', target_type: 'user', target_id: clerk.id, obj: 'orders', act: 'read', domain: 'm1', actor_id: m1.id, actor_type: 'merchant', ip: '127.0.0.1' })
  })

  t.test('filters combine with AND', async (t) => {
    const roleGrants = await list('?target_type=role&action=grant')
    t.equal(roleGrants.body.data.total, 3)
    const clerkGrants = await list('?target_type=role&target_id=clerk&action=grant')
    t.equal(clerkGrants.body.data.total, 2)
    t.ok((clerkGrants.body.data.items as Array<{ target_id: string }>).every((i) => i.target_id === 'clerk'))
    const catalog = await list('?target_type=permission&action=catalog_added&page_size=100')
    t.ok(catalog.body.data.total >= 16)
    t.ok((catalog.body.data.items as Array<{ actor_id: string; target_id: string }>).every((i) => i.actor_id === 'system' && /^[a-z]+:[a-z]+$/.test(i.target_id)))
    const none = await list('?target_type=user&action=catalog_added')
    t.equal(none.body.data.total, 0)
    t.same(none.body.data.items, [])
  })

  t.test('paging', async (t) => {
    const first = await list('?page_size=2&page=1')
    const second = await list('?page_size=2&page=2')
    t.equal(first.body.data.items.length, 2)
    t.equal(second.body.data.page, 2)
    t.ok(first.body.data.items[1].id > second.body.data.items[0].id)
    const beyond = await list('?page=1000')
    t.same(beyond.body.data.items, [])
  })

  t.test('bad paging and filters are a localised 400', async (t) => {
    for (const q of ['?page=0', '?page=-1', '?page=1.5', '?page=abc', '?page_size=0', '?page_size=101', '?target_type=group']) {
      const res = await list(q)
      t.equal(res.status, 400, q)
      t.equal(res.body.response_code, '100')
    }
    const es = await list('?page_size=101&lang=es')
    t.match(es.body.errors, [{ field: 'page_size', message: /como máximo 100/ }])
  })

  t.test('merchant callers see only their merchant', async (t) => {
    const mine = await list('?page_size=100', ta.tokenFor(m1))
    t.equal(mine.status, 200)
    const items = mine.body.data.items as Array<{ domain: string | null; target_id: string; action: string }>
    t.ok(items.length >= 3)
    t.ok(items.every((i) => i.domain === 'm1'), 'only m1 entries')
    t.notOk(items.some((i) => i.action.startsWith('catalog')))
    const other = await list('?page_size=100', ta.tokenFor(m2))
    t.ok((other.body.data.items as Array<{ domain: string }>).every((i) => i.domain === 'm2'))
    const clerkToken = ta.tokenFor(clerk)
    t.equal((await list('', clerkToken)).status, 403, 'permission:read is required')
  })

  t.test('actors and user targets by name and e-mail, tenant-confined; filters by actor, target and dates', async (t) => {
    const deny = (await list('?action=deny')).body.data.items[0]
    t.match(deny, { actor_email: m1.email, actor_name: m1.name, target_email: 'clerk@m1.example', target_id: clerk.id }, 'the system owner sees both')
    const catalogEntry = (await list('?action=catalog_added&page_size=1')).body.data.items[0]
    t.match(catalogEntry, { actor_id: 'system', actor_email: null, target_email: null }, 'the service and non-user targets have no account')
    const byEmail = await list(`?actor=${encodeURIComponent(m1.email)}`)
    t.ok(byEmail.body.data.total >= 2, "the actor filter takes an e-mail")
    t.ok((byEmail.body.data.items as Array<{ actor_id: string }>).every((i) => i.actor_id === m1.id), 'and finds only its entries')
    t.equal((await list(`?actor=${m1.id}`)).body.data.total, byEmail.body.data.total, 'or the id')
    const target = await list(`?target=${encodeURIComponent('CLERK@m1.example')}`)
    t.ok(target.body.data.items.length >= 2 && (target.body.data.items as Array<{ target_id: string }>).every((i) => i.target_id === clerk.id), 'the target filter takes an e-mail, any case')
    t.equal((await list('?target=nobody%40nowhere.example')).body.data.total, 0, 'an e-mail of nobody finds nothing')
    // Tenant-confined: m2's admin learns nothing of m1's people, neither names nor by filtering.
    t.equal((await list(`?target=${encodeURIComponent('clerk@m1.example')}`, ta.tokenFor(m2))).body.data.total, 0, "another merchant's e-mail finds nothing")
    const rootEntries = (await list('?page_size=100', ta.tokenFor(m1))).body.data.items as Array<{ actor_type: string; actor_email: string | null }>
    t.ok(rootEntries.some((i) => i.actor_type === 'merchant' && i.actor_email === m1.email), "a merchant sees its own people's names")
    t.ok(rootEntries.filter((i) => i.actor_type !== 'merchant').every((i) => i.actor_email === null), 'not platform staff')
    const future = new Date(Date.now() + 60_000).toISOString()
    const past = new Date(Date.now() - 3_600_000).toISOString()
    t.equal((await list(`?from=${encodeURIComponent(future)}`)).body.data.total, 0, 'nothing from a minute ahead')
    t.equal((await list(`?until=${encodeURIComponent(past)}`)).body.data.total, 0, 'nothing before an hour ago')
    const all = (await list('')).body.data.total
    t.equal((await list(`?from=${encodeURIComponent(past)}&until=${encodeURIComponent(future)}`)).body.data.total, all, 'everything in between')
    t.equal((await list('?from=yesterday')).status, 400, 'a date that is not RFC 3339 is refused')
  })
})
