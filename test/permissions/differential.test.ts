/**
 * One answer everywhere: for random worlds of sub-roles, users, domains,
 * grants, role denies and user overrides, every (user, domain, obj, act)
 * is decided by
 *   1. a plain reading of CONTRACT section 3 written in this file (the oracle),
 *   2. Casbin's enforce() behind the engine's tenant/root/catalog rules,
 *   3. the check endpoint (check-batch and single check),
 *   4. the effective-permission listing (get-user-permissions),
 *   5. the route guard (for the caller's home domain),
 * and all five must agree, before and after a full reload.
 */
import fc from 'fast-check'
import Fastify from 'fastify'
import t from 'tap'
import { declaredCatalog, type PermissionDeclaration } from '../../src/domain/permissions.js'
import { GLOBAL_DOMAIN, homeDomain, type Account } from '../../src/domain/principals.js'
import { syncCatalog } from '../../src/commands/syncCatalog.js'
import authentication from '../../src/http/plugins/authentication.js'
import authorization from '../../src/http/plugins/authorization.js'
import { insertRule } from '../../src/storage/policyRows.js'
import { buildTestApp, onboard, register } from '../helper.js'

const SEED = 20261123
const RUNS = Number(process.env.DIFFERENTIAL_RUNS ?? 12)
const MERCHANTS = ['m1', 'm2'] as const
const DOMAINS = [GLOBAL_DOMAIN, 'm1', 'm2', 'm9'] as const
const ROLES = ['r1', 'r2', 'r3'] as const

type Effect = 'allow' | 'deny'
interface Pair {
  obj: string
  act: string
}

t.test('the oracle, enforce(), check, listing and guard agree', async (t) => {
  const ta = await buildTestApp(t)
  const { service } = ta
  // One declared pair is deactivated, so inactive entries are part of every world.
  const declared = declaredCatalog()
  const inactive = declared.find((p) => p.obj === 'reports') as PermissionDeclaration
  await syncCatalog(service, declared.filter((p) => p !== inactive))
  const pairs: Pair[] = [...declared.map(({ obj, act }) => ({ obj, act })), { obj: 'unknown', act: 'thing' }]
  const active = (p: Pair) => service.engine.isActive(p.obj, p.act)
  t.equal(active(inactive), false, 'the deactivated pair is inactive')

  const owners = new Map<string, Account>()
  for (const m of MERCHANTS) owners.set(m, await onboard(ta, m))

  // The route guard on its own instance: one route per pair, each declaring that pair.
  const guard = Fastify({ logger: false })
  await guard.register(authentication, { config: service.config, accounts: service.accounts })
  await guard.register(authorization, { engine: service.engine })
  for (const p of pairs) {
    guard.get(`/guard/${p.obj}/${p.act}`, { config: { permission: { ...p, label: '', group: '' } } }, async () => 'ok')
  }
  await guard.ready()
  t.teardown(() => guard.close())

  let compared = 0
  let mismatches = 0
  let userCounter = 0
  const roleArb = fc.constantFrom(...ROLES)
  const pairArb = fc.nat({ max: pairs.length - 1 })
  const effectArb = fc.constantFrom<Effect>('allow', 'allow', 'deny')
  const world = fc.record({
    users: fc.array(fc.record({ home: fc.constantFrom(GLOBAL_DOMAIN, ...MERCHANTS), role: roleArb }), { minLength: 2, maxLength: 6 }),
    roleRows: fc.array(
      fc.record({ role: roleArb, domain: fc.constantFrom(GLOBAL_DOMAIN, ...MERCHANTS), pair: pairArb, effect: effectArb }),
      { maxLength: 25 },
    ),
    overrides: fc.array(
      fc.record({ user: fc.nat(), domain: fc.constantFrom(GLOBAL_DOMAIN, ...MERCHANTS), pair: pairArb, effect: effectArb }),
      { maxLength: 15 },
    ),
  })

  await fc.assert(
    fc.asyncProperty(world, async (w) => {
      // A fresh policy for every world: users stay, rules go.
      await service.db.query("DELETE FROM casbin_rule WHERE ptype = 'p'")
      await service.db.query('DELETE FROM permission_overrides')
      await service.reload()

      const users: Account[] = [ta.root, ...owners.values()]
      for (const u of w.users) {
        const email = `u${userCounter++}@diff.example`
        users.push(await register(ta, { email, sub_role_code: u.role, ...(u.home !== GLOBAL_DOMAIN ? { merchant_id: u.home } : {}) }))
      }
      // Oracle state, written as the contract reads.
      const roleRules: Array<{ role: string; domain: string; pair: Pair; effect: Effect }> = []
      const userRules = new Map<string, { domain: string; pair: Pair; effect: Effect }>()
      for (const r of w.roleRows) {
        const pair = pairs[r.pair] as Pair
        if (!active(pair)) continue
        if (r.effect === 'allow') {
          const res = await ta.call({
            method: 'POST',
            url: `/v2/admin/permissions/roles/${r.role}/grant`,
            body: { command: 'grant-role-permission', data: { ...pair, domain: r.domain } },
          })
          if (res.statusCode !== 200) throw new Error(`grant failed: ${res.body}`)
        } else {
          // Role-level denies are not an API command, but the model honours them: write the row as another tool would.
          await insertRule(service.db, 'p', [r.role, r.domain, pair.obj, pair.act, 'deny'])
          await service.engine.addRule('p', [r.role, r.domain, pair.obj, pair.act, 'deny'])
        }
        if (!roleRules.some((x) => x.role === r.role && x.domain === r.domain && x.pair === pair && x.effect === r.effect)) {
          roleRules.push({ role: r.role, domain: r.domain, pair, effect: r.effect })
        }
      }
      const grantees = users.filter((u) => !service.engine.isRootRole(u.sub_role_code))
      for (const o of w.overrides) {
        if (grantees.length === 0) break
        const user = grantees[o.user % grantees.length] as Account
        const pair = pairs[o.pair] as Pair
        if (!active(pair)) continue
        const domain = user.principal_type === 'merchant' ? homeDomain(user) : o.domain
        const res = await ta.call({
          method: 'POST',
          url: `/v2/admin/permissions/users/${user.id}/${o.effect === 'allow' ? 'grant' : 'deny'}`,
          body: { command: `${o.effect === 'allow' ? 'grant' : 'deny'}-user-permission`, data: { ...pair, domain } },
        })
        if (res.statusCode !== 200) throw new Error(`override failed: ${res.body}`)
        userRules.set(`${user.id}|${domain}|${pair.obj}|${pair.act}`, { domain, pair, effect: o.effect })
      }

      const oracle = (u: Account, domain: string, pair: Pair): boolean => {
        if (!active(pair)) return false
        if (u.principal_type === 'merchant' && u.merchant_id !== domain) return false
        if (service.engine.isRootRole(u.sub_role_code)) return true
        const roleDomains = u.principal_type === 'merchant' ? [domain, GLOBAL_DOMAIN] : [GLOBAL_DOMAIN]
        const userDomains = [domain, GLOBAL_DOMAIN]
        const effects: Effect[] = []
        for (const r of roleRules) {
          if (r.role === u.sub_role_code && roleDomains.includes(r.domain) && r.pair === pair) effects.push(r.effect)
        }
        for (const d of userDomains) {
          const o = userRules.get(`${u.id}|${d}|${pair.obj}|${pair.act}`)
          if (o !== undefined) effects.push(o.effect)
        }
        return effects.includes('allow') && !effects.includes('deny')
      }

      const compareAll = async (phase: string) => {
        for (const u of users) {
          const token = ta.tokenFor(u)
          for (const domain of DOMAINS) {
            const batch = await ta.call({
              method: 'POST',
              url: '/v2/authz/check-batch',
              body: { command: 'check-batch', data: { user_id: u.id, checks: pairs.map((p) => ({ ...p, domain })) } },
            })
            const results = (batch.json() as { data: { results: Array<{ allowed: boolean }> } }).data.results
            const listing = await ta.call({ method: 'GET', url: `/v2/admin/permissions/users/${u.id}?domain=${domain}` })
            const listed = new Set(
              (listing.json() as { data: { permissions: Pair[] } }).data.permissions.map((p) => `${p.obj}:${p.act}`),
            )
            for (const [i, pair] of pairs.entries()) {
              const expected = oracle(u, domain, pair)
              const raw = service.engine.enforce(u.id, domain, pair.obj, pair.act)
              const engineSays =
                active(pair) &&
                (u.principal_type !== 'merchant' || u.merchant_id === domain) &&
                (service.engine.isRootRole(u.sub_role_code) || raw)
              const answers = [engineSays, service.engine.decide(u, domain, pair.obj, pair.act), results[i]?.allowed, listed.has(`${pair.obj}:${pair.act}`)]
              if (domain === homeDomain(u)) {
                const guarded = await guard.inject({ method: 'GET', url: `/guard/${pair.obj}/${pair.act}`, headers: { authorization: `Bearer ${token}` } })
                answers.push(guarded.statusCode === 200)
              }
              compared++
              if (answers.some((a) => a !== expected)) {
                mismatches++
                t.fail(`${phase}: ${u.principal_type}/${u.sub_role_code} in ${domain} ${pair.obj}:${pair.act}: oracle ${expected}, got ${JSON.stringify(answers)}`)
              }
            }
          }
          // The single-check endpoint answers for itself (caller = subject) on one sampled pair per user.
          const sample = pairs[compared % pairs.length] as Pair
          const single = await ta.call({ method: 'GET', url: `/v2/authz/check?obj=${sample.obj}&act=${sample.act}`, token })
          const expected = oracle(u, homeDomain(u), sample)
          compared++
          if ((single.json() as { data: { allowed: boolean } }).data.allowed !== expected) {
            mismatches++
            t.fail(`${phase}: single check for ${u.id} ${sample.obj}:${sample.act}`)
          }
        }
      }
      await compareAll('incremental')
      await service.reload()
      await compareAll('after reload')
    }),
    { seed: SEED, numRuns: RUNS, endOnFailure: true },
  )
  t.equal(mismatches, 0, `${compared} decisions compared, ${mismatches} mismatches`)
  t.ok(compared > RUNS * 100, `compared ${compared} decisions`)
  t.comment(`differential: ${compared} decisions compared, ${mismatches} mismatches (seed ${SEED}, ${RUNS} worlds)`)
})
