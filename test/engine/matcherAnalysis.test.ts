import { newEnforcer } from 'casbin'
import t from 'tap'
import { RulesAdapter } from '../../src/engine/adapter.js'
import { PermissionEngine } from '../../src/engine/engine.js'
import { readMatcher } from '../../src/engine/matcherAnalysis.js'
import { parseModel } from '../../src/engine/model.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the engine in memory')

function model(matcher: string): string {
  return `[request_definition]\nr = sub, dom, obj, act\n\n[policy_definition]\np = sub, dom, obj, act, eft\n\n[role_definition]\ng = _, _, _\n\n[policy_effect]\ne = some(where (p.eft == allow)) && !some(where (p.eft == deny))\n\n[matchers]\nm = ${matcher}\n`
}

const TIED = 'g(r.sub, p.sub, r.dom) && p.dom == r.dom && r.obj == p.obj && r.act == p.act'
const rules = {
  p: [
    ['r1', 'm1', 'orders', 'read', 'allow'],
    ['r1', 'm1', 'reports', 'read', 'allow'],
    ['u1', 'm1', 'orders', 'read', 'deny'],
  ],
  g: [
    ['u1', 'r1', 'm1'],
    ['u2', 'r1', 'm1'],
  ],
}

t.test("the matcher is read as Casbin reads it (its bracket rewrite and its `in`), whether or not Casbin has compiled a matcher yet", async (t) => {
  // Casbin registers `in` with the parser the first time it compiles a matcher; the reading must not depend on that having happened.
  // Casbin's `in` binds looser than `&&`: the brackets keep it to its own atom.
  const text = model(`(r.obj in ('orders', 'payouts')) && ${TIED}`)
  const reading = readMatcher(parseModel(text))
  t.not(reading.tree, null, 'the tree Casbin evaluates')
  t.equal(reading.alternatives?.length, 1, 'one alternative, tied to the requester')
  t.same(reading.alternatives?.[0]?.pins, { dom: { from: 'request', field: 'dom' }, obj: { from: 'request', field: 'obj' }, act: { from: 'request', field: 'act' } })
  const engine = await PermissionEngine.fromRules(text, { p: rules.p.map((r) => [...r]), g: rules.g.map((r) => [...r]) })
  t.equal(engine.mode, 'candidates-enforce', 'the edited model keeps its candidate rows (Casbin evaluates its `in`)')
  const casbin = await newEnforcer(parseModel(text), new RulesAdapter({ p: rules.p.map((r) => [...r]), g: rules.g.map((r) => [...r]) }))
  for (const sub of ['u1', 'u2', 'r1'])
    for (const obj of ['orders', 'reports', 'payouts'])
      t.equal(engine.uncachedModelAllows(sub, 'm1', obj, 'read'), casbin.enforceSync(sub, 'm1', obj, 'read'), `${sub} ${obj}: Casbin's answer`)
})

t.test('eval() and a matcher that does not parse leave no tree and no alternatives', async (t) => {
  for (const matcher of [`eval(p.sub_rule) && ${TIED}`, `${TIED} &&`]) {
    const reading = readMatcher(parseModel(model(matcher)))
    t.equal(reading.tree, null, matcher)
    t.equal(reading.alternatives, null, matcher)
  }
  const untied = readMatcher(parseModel(model('r.obj == p.obj && r.act == p.act && p.dom == r.dom')))
  t.not(untied.tree, null, 'an untied matcher still has its tree (the compiler may read it)')
  t.equal(untied.alternatives, null, 'but no alternatives: no row can be ruled out')
})
