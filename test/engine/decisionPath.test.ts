import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { choosePath } from '../../src/engine/decisionPath.js'
import { PermissionEngine } from '../../src/engine/engine.js'
import { REASON } from '../../src/engine/explain.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the engine in memory')

const shipped = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
const MODELS = [
  { path: 'index', text: shipped, cached: false },
  { path: 'candidates', text: shipped.replace('r.obj == p.obj && r.act == p.act', 'r.act == p.act && r.obj == p.obj'), cached: false },
  // A comparison the compiler does not read: the candidate rows go to Casbin's enforce().
  { path: 'candidates-enforce', text: shipped.replace('r.obj == p.obj && r.act == p.act', 'r.obj == p.obj && r.act == p.act && 1 < 2'), cached: true },
  // One alternative without a subject tie: no row can be ruled out.
  {
    path: 'enforce-cache',
    text: shipped.replace('(g(r.sub, p.sub, "global") && p.dom == "global")', '((g(r.sub, p.sub, "global") || r.sub == "nobody") && p.dom == "global")'),
    cached: true,
  },
] as const

const rules = () => ({ p: [['clerk', 'm1', 'orders', 'read', 'allow']], g: [['u1', 'clerk', 'm1']] })
const catalog = [{ obj: 'orders', act: 'read', label: 'Read orders', group_name: 'Orders', is_active: true }]
const clerk = { id: 'u1', principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'clerk' }

t.test('each model gets one of four decision paths, each its own implementation, with a cache only where enforce() decides', async (t) => {
  const kinds = new Set<unknown>()
  for (const { path, text, cached } of MODELS) {
    t.equal((await choosePath(text)).name, path, `${path}: chosen`)
    const engine = await PermissionEngine.fromRules(text, rules(), { rootRoles: [], catalog })
    t.equal(engine.mode, path, `${path}: the engine's path`)
    const loaded = (engine as unknown as { path: { constructor: unknown; cache?: { size: number } } }).path
    kinds.add(loaded.constructor)
    t.equal(engine.decide(clerk, 'm1', 'orders', 'read'), true, `${path}: the grant decides`)
    t.equal((loaded.cache?.size ?? 0) > 0, cached, `${path}: ${cached ? 'the answer is cached' : 'no cache'}`)
    await engine.removeRule('p', ['clerk', 'm1', 'orders', 'read', 'allow'])
    t.equal(engine.decide(clerk, 'm1', 'orders', 'read'), false, `${path}: a write reaches the answer (and clears a cache)`)
  }
  t.equal(kinds.size, MODELS.length, 'four implementations')
})

t.test('no file of the engine but the one that chooses tests which path it is on', async (t) => {
  const root = new URL('../../src/engine/', import.meta.url).pathname
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && f !== 'decisionPath.ts')
  t.ok(files.length > 10, `${files.length} files read`)
  const tests = /\bmode\s*[!=]==|\bnarrowing\b|\bcompiled\s*[!=]==\s*null|\.name\s*[!=]==\s*'(index|candidates|candidates-enforce|enforce-cache)'/
  const found = files.flatMap((f) =>
    readFileSync(join(root, f), 'utf8')
      .split('\n')
      .filter((line) => tests.test(line))
      .map((line) => `${f}: ${line.trim()}`),
  )
  t.same(found, [], 'no branch on the decision path')
})

t.test('every path hands back the reason of the decision it took, and the row that decided, read right after', async (t) => {
  for (const { path, text } of MODELS) {
    const engine = await PermissionEngine.fromRules(text, { p: [...rules().p, ['u1', 'm1', 'orders', 'read', 'deny']], g: rules().g }, { rootRoles: ['boss'], catalog })
    t.equal(engine.decision(clerk, 'm1', 'orders', 'read'), REASON.user_deny, `${path}: the user's own deny`)
    t.same(engine.decidingRule(), ['u1', 'm1', 'orders', 'read', 'deny'], `${path}: its row`)
    await engine.removeRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
    t.equal(engine.decision(clerk, 'm1', 'orders', 'read'), REASON.role, `${path}: the role's grant`)
    t.same(engine.decidingRule(), ['clerk', 'm1', 'orders', 'read', 'allow'], `${path}: its row`)
    t.equal(engine.decision({ ...clerk, status: 'deactivated' }, 'm1', 'orders', 'read'), REASON.deactivated, `${path}: a deactivated account`)
    t.equal(engine.decidingRule(), null, `${path}: no row decided that`)
    t.same(engine.explain({ ...clerk, status: 'deactivated' }, 'm1', 'orders', 'read').reason, { kind: 'none' }, `${path}: an explanation says none`)
    t.equal(engine.decision({ ...clerk, sub_role_code: 'boss' }, 'm1', 'orders', 'read'), REASON.root, `${path}: root`)
    t.equal(engine.decision(clerk, 'm2', 'orders', 'read'), REASON.outside_home_domain, `${path}: outside its merchant`)
    t.equal(engine.decision(clerk, 'm1', 'orders', 'write'), REASON.not_in_catalog, `${path}: not in the catalog`)
  }
})
