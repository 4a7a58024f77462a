import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { DECISION_CACHE_LIMIT } from '../../src/engine/engine.js'
import { buildTestApp, buildTestService, onboard, register, tempDir } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the decision hot path in memory')

t.test('the check path answers from memory: it still works with the database gone', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
  await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    token: ta.tokenFor(owner),
    body: { command: 'grant-role-permission', data: { obj: 'orders', act: 'read' } },
  })
  const token = ta.tokenFor(clerk)
  const ask = () => ta.call({ method: 'GET', url: '/v2/authz/check?obj=orders&act=read', token })
  t.equal((await ask()).json().data.allowed, true)
  await ta.service.db.close()
  const after = await ask()
  t.equal(after.statusCode, 200, 'no database needed')
  t.equal(after.json().data.allowed, true)
  const other = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  t.equal(other.json().data.allowed, true, 'asking about another user needs no database either')
  const batch = await ta.call({
    method: 'POST',
    url: '/v2/authz/check-batch',
    token,
    body: { command: 'check-batch', data: { checks: [{ obj: 'orders', act: 'read' }, { obj: 'orders', act: 'refund' }] } },
  })
  t.same(batch.json().data.results.map((r: { allowed: boolean }) => r.allowed), [true, false])
})

t.test('a reload swaps the whole policy at once: checks during it never see a partial one', async (t) => {
  const ta = await buildTestApp(t)
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
  for (const act of ['read', 'refund', 'cancel']) {
    await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      token: ta.tokenFor(owner),
      body: { command: 'grant-role-permission', data: { obj: 'orders', act } },
    })
  }
  await ta.call({
    method: 'POST',
    url: `/v2/admin/permissions/users/${clerk.id}/deny`,
    token: ta.tokenFor(owner),
    body: { command: 'deny-user-permission', data: { obj: 'orders', act: 'cancel' } },
  })
  let done = false
  let checks = 0
  let wrong = 0
  const reloading = ta.service.reload().then(() => {
    done = true
  })
  while (!done) {
    const e = ta.service.engine
    if (!e.decide(clerk, 'm1', 'orders', 'read') || !e.decide(clerk, 'm1', 'orders', 'refund') || e.decide(clerk, 'm1', 'orders', 'cancel')) wrong++
    checks++
    await new Promise((resolve) => setImmediate(resolve))
  }
  await reloading
  t.ok(checks > 0, `${checks} checks ran during the reload`)
  t.equal(wrong, 0, 'every check saw the whole policy')
})

t.test('a model the index does not know is logged and served through enforce()', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'model-'))
  const shipped = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
  // One alternative no longer ties the policy's subject to the requester: no row can be ruled out for it.
  writeFileSync(join(dir, 'model.conf'), shipped.replace('(g(r.sub, p.sub, "global") && p.dom == "global")', '((g(r.sub, p.sub, "global") || r.sub == "nobody") && p.dom == "global")'))
  const warnings: string[] = []
  const log = { info: () => undefined, error: () => undefined, warn: (_obj: object, msg?: string) => void warnings.push(msg ?? '') }
  const service = await buildTestService(t, { env: { MODEL_PATH: join(dir, 'model.conf') }, log })
  t.equal(service.engine.mode, 'enforce-cache')
  t.match(warnings.join('\n'), /enforce\(\) with a cache/)
  const shippedService = await buildTestService(t, { log })
  t.equal(shippedService.engine.mode, 'index')

  t.test("the fallback's decision cache stays bounded whatever domains callers ask about", async (t) => {
    const { engine } = service
    const [pair] = engine.catalogEntries().filter((e) => e.is_active)
    if (pair === undefined) throw new Error('no active catalog entry')
    const staff = { id: '33333333-3333-4333-8333-333333333333', principal_type: 'system_owner' as const, merchant_id: null, sub_role_code: 'staff' }
    const cache = () => (engine as unknown as { path: { cache: { size: number } } }).path.cache
    for (let i = 0; i < DECISION_CACHE_LIMIT + 50; i++) engine.decide(staff, `d${i}`, pair.obj, pair.act)
    t.ok(cache().size <= DECISION_CACHE_LIMIT, `${cache().size} cached decisions`)
    t.ok(cache().size > 0, 'and it still caches')
    t.equal(engine.decide(staff, 'd1', pair.obj, pair.act), engine.enforce(staff.id, 'd1', pair.obj, pair.act), 'answers stay those of enforce()')
  })
})

t.test('an edited model with a compiled matcher keeps no decision cache; one left to Casbin keeps one', async (t) => {
  const shipped = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
  const cacheOf = (engine: object) => (engine as { path: { cache?: { size: number } } }).path.cache
  const staff = { id: '44444444-4444-4444-8444-444444444444', principal_type: 'system_owner' as const, merchant_id: null, sub_role_code: 'staff' }
  const models: Array<[string, string, 'candidates' | 'candidates-enforce', boolean]> = [
    ['the equality rewrite', shipped.replace('r.obj == p.obj && r.act == p.act', 'r.act == p.act && r.obj == p.obj'), 'candidates', false],
    // An arithmetic comparison the compiler does not read: candidates narrowed, Casbin's enforce() over them.
    ['a matcher the compiler does not read', shipped.replace('r.obj == p.obj && r.act == p.act', 'r.obj == p.obj && r.act == p.act && 1 < 2'), 'candidates-enforce', true],
  ]
  for (const [name, text, mode, cached] of models) {
    const dir = tempDir(t, 'model-')
    writeFileSync(join(dir, 'model.conf'), text)
    const { engine } = await buildTestService(t, { env: { MODEL_PATH: join(dir, 'model.conf'), ALLOW_FAILING_MODEL_DECISIONS: 'true' } })
    t.equal(engine.mode, mode, `${name}: ${mode}`)
    const [pair] = engine.catalogEntries().filter((e) => e.is_active)
    if (pair === undefined) throw new Error('no active catalog entry')
    t.equal(engine.decide(staff, 'm1', pair.obj, pair.act), engine.enforce(staff.id, 'm1', pair.obj, pair.act), `${name}: the answer is enforce()'s`)
    t.equal((cacheOf(engine)?.size ?? 0) > 0, cached, cached ? `${name}: the decision is cached` : `${name}: nothing is cached`)
  }
})
