/**
 * Writes in 'candidates' mode change the candidate index only, and Casbin's
 * list is built again from it when read. After random adds and removals of
 * p and g rows, every decision (uncached, and Casbin's own enforce() on the
 * engine's list) equals what a fresh enforcer answers over the rows as
 * Casbin would hold them: p rows appended on add, taken out on removal,
 * the others keeping their order. That order is what the priority effect
 * reads, so the rows are kept here independently of the engine.
 */
import { newEnforcer } from 'casbin'
import t from 'tap'
import { RulesAdapter } from '../../src/engine/adapter.js'
import { PermissionEngine } from '../../src/engine/engine.js'
import { parseModel } from '../../src/engine/model.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { random } from '../support/seededRandom.js'

onceOnPGlite('the engine in memory')

const ROLE_TIES = '((g(r.sub, p.sub, r.dom) && (p.dom == r.dom || p.dom == "global")) || (g(r.sub, p.sub, "global") && p.dom == "global"))'

function model(matcher: string, effect: string): string {
  return `[request_definition]\nr = sub, dom, obj, act\n\n[policy_definition]\np = sub, dom, obj, act, eft\n\n[role_definition]\ng = _, _, _\n\n[policy_effect]\ne = ${effect}\n\n[matchers]\nm = ${matcher}\n`
}

const MODELS: Array<{ name: string; text: string; path?: string }> = [
  { name: 'priority, objects by keyMatch2 (several rows per subject, domain and action)', text: model(`keyMatch2(r.obj, p.obj) && r.act == p.act && ${ROLE_TIES}`, 'priority(p.eft) || deny') },
  { name: 'priority, equalities', text: model(`r.obj == p.obj && r.act == p.act && ${ROLE_TIES}`, 'priority(p.eft) || deny') },
  { name: 'deny-override', text: model(`r.obj == p.obj && r.act == p.act && ${ROLE_TIES}`, '!some(where (p.eft == deny))') },
  // `>` is not compiled: the candidates go to Casbin's enforce, over the list swapped in.
  { name: 'priority, matcher left to Casbin', text: model(`r.obj == p.obj && r.act == p.act && 2 > 1 && ${ROLE_TIES}`, 'priority(p.eft) || deny'), path: 'candidates-enforce' },
]

const USERS = ['u1', 'u2', 'u3']
const ROLES = ['r1', 'r2', 'r3']
const DOMAINS = ['global', 'm1', 'm2']
const OBJECTS = ['orders', 'orders/1', '/data/7', 'reports']
const ROW_OBJECTS = [...OBJECTS, 'orders/*', '/data/:id', '/data/*', 'orders/:id']
const ACTS = ['read', 'write']

const same = (a: readonly string[], b: readonly string[]) => a.join('\u0000') === b.join('\u0000')

/** Casbin's own list semantics: an add appends a row not held, a removal takes every equal row out, the rest in order. */
function write(list: string[][], op: 'add' | 'remove', values: string[]): void {
  const at = list.findIndex((row) => same(row, values))
  if (op === 'add' && at === -1) list.push(values)
  if (op === 'remove') for (let i = list.length - 1; i >= 0; i--) if (same(list[i] as string[], values)) list.splice(i, 1)
}

/** Many objects: with keyMatch2 on the object, a subject's list of one domain and action grows long (the index then finds rows by a row table). */
const MANY_OBJECTS = [...ROW_OBJECTS, ...Array.from({ length: 60 }, (_, i) => `/data/${i}`)]

const SETUPS = [
  ...MODELS.map((m, i) => ({ ...m, seed: 7000 + i, objects: ROW_OBJECTS, subjects: [...ROLES, ...USERS], domains: DOMAINS, initial: 60, reuse: 0.45 })),
  // One subject's rows of one domain, many objects: lists short at load that grow long with the writes, and lists long from the load on.
  { ...(MODELS[0] as (typeof MODELS)[number]), name: 'priority, keyMatch2, lists growing long', seed: 7100, objects: MANY_OBJECTS, subjects: ['r1'], domains: ['m1'], initial: 10, reuse: 0.2 },
  { ...(MODELS[0] as (typeof MODELS)[number]), name: 'priority, keyMatch2, lists long from the load', seed: 7200, objects: MANY_OBJECTS, subjects: ['r1', 'u1'], domains: ['m1'], initial: 300, reuse: 0.5 },
]

for (const { name, text, path, seed, objects, subjects, domains, initial, reuse } of SETUPS) {
  t.test(name, async (t) => {
    const r = random(seed)
    const ROW_OBJECTS = objects
    const rows = { p: [] as string[][], g: [] as string[][] }
    const pRow = () => [r.pick(subjects), r.pick(domains), r.pick(ROW_OBJECTS), r.pick(ACTS), r.next() < 0.5 ? 'allow' : 'deny']
    for (let i = 0; i < initial; i++) write(rows.p, 'add', pRow())
    for (let i = 0; i < 6; i++) write(rows.g, 'add', [r.pick(USERS), r.pick(ROLES), r.pick(DOMAINS)])
    const engine = await PermissionEngine.fromRules(text, { p: rows.p.map((row) => [...row]), g: rows.g.map((row) => [...row]) })
    t.equal(engine.mode, path ?? 'candidates')
    let compared = 0
    let mismatches = 0
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < (initial > 100 ? 120 : 40); i++) {
        const ptype = r.next() < 0.25 ? 'g' : 'p'
        const list = rows[ptype]
        const values =
          r.next() < reuse && list.length > 0 ? [...r.pick(list)] : ptype === 'p' ? pRow() : [r.pick(USERS), r.pick(ROLES), r.pick(DOMAINS)]
        const op = list.some((row) => same(row, values)) ? 'remove' : 'add'
        write(list, op, values)
        if (op === 'add') await engine.addRule(ptype, values)
        else await engine.removeRule(ptype, values)
        // A decision between writes, as a service answers checks while writes go on.
        engine.uncachedModelAllows(r.pick(USERS), r.pick(DOMAINS), r.pick(OBJECTS), r.pick(ACTS))
      }
      const reference = await newEnforcer(parseModel(text), new RulesAdapter({ p: rows.p.map((row) => [...row]), g: rows.g.map((row) => [...row]) }))
      for (const sub of [...USERS, ...ROLES]) {
        for (const dom of DOMAINS) {
          for (const obj of OBJECTS) {
            for (const act of ACTS) {
              const expected = reference.enforceSync(sub, dom, obj, act)
              compared++
              if (engine.uncachedModelAllows(sub, dom, obj, act) !== expected && mismatches++ < 5) t.fail(`uncached ${sub} ${dom} ${obj} ${act}: expected ${expected}`)
              if (engine.enforce(sub, dom, obj, act) !== expected && mismatches++ < 5) t.fail(`enforce() ${sub} ${dom} ${obj} ${act}: expected ${expected}`)
            }
          }
        }
      }
      t.same(
        engine.loadedRules.p.map((row) => [...row]),
        rows.p,
        `round ${round}: the loaded p rows are the written ones, in Casbin's order`,
      )
      t.same(
        engine.loadedRules.g.map((row) => row.join()).sort(),
        rows.g.map((row) => row.join()).sort(),
        `round ${round}: the loaded g rows are the written ones`,
      )
    }
    t.equal(mismatches, 0, `${compared} decisions compared, ${mismatches} mismatches`)
  })
}

t.test('a row removed and added back moves to the end of the list, where the priority effect reads it last', async (t) => {
  const text = MODELS[1]?.text as string
  const allow = ['r1', 'm1', 'orders', 'read', 'allow']
  const deny = ['u1', 'm1', 'orders', 'read', 'deny']
  const engine = await PermissionEngine.fromRules(text, { p: [allow, deny], g: [['u1', 'r1', 'm1']] })
  t.equal(engine.uncachedModelAllows('u1', 'm1', 'orders', 'read'), true, 'the first matching row (the allow) decides')
  await engine.removeRule('p', allow)
  t.equal(engine.uncachedModelAllows('u1', 'm1', 'orders', 'read'), false, 'the deny alone')
  await engine.addRule('p', allow)
  t.equal(engine.uncachedModelAllows('u1', 'm1', 'orders', 'read'), false, 'the deny comes first now')
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, "Casbin's enforce() reads the same order")
  t.same(engine.loadedRules.p, [deny, allow])
  await engine.addRule('p', allow)
  t.same(engine.loadedRules.p, [deny, allow], 'a row held is not added twice')
  await engine.removeRule('p', deny)
  await engine.removeRule('p', deny)
  t.same(engine.loadedRules.p, [allow], 'a row not held is not removed')
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), true)
})
