/**
 * Every model of the family decides as node-casbin does: for a corpus of
 * model variants (rewrites that keep the meaning, keyMatch/keyMatch2/
 * regexMatch/globMatch on the object or action, domain rules changed,
 * effect variants, role hierarchies of several levels), random policies and
 * random writes, each decision (uncached and cached), each explanation's
 * verdict and row, each dry run, each holders list, each preview's counts
 * and each check-batch answer equals what a fresh enforcer over the same
 * rows, in the same order, answers (with the tenant rule: a merchant user
 * holds nothing outside its merchant).
 */
import { newEnforcer, type Enforcer } from 'casbin'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { RulesAdapter } from '../../src/engine/adapter.js'
import { PermissionEngine, type Subject } from '../../src/engine/engine.js'
import { parseModel } from '../../src/engine/model.js'
import { permissionHolders, type AccountSource } from '../../src/engine/holders.js'
import { previewChanges, roleReach } from '../../src/engine/preview.js'
import { checkPermissions } from '../../src/commands/permissionQueries.js'
import type { Account } from '../../src/domain/principals.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { random } from './seededRandom.js'

onceOnPGlite('the engine in memory')

const shipped = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
const SHIPPED_MATCHER = 'r.obj == p.obj && r.act == p.act && ((g(r.sub, p.sub, r.dom) && (p.dom == r.dom || p.dom == "global")) || (g(r.sub, p.sub, "global") && p.dom == "global"))'
const ALLOW_AND_DENY = 'some(where (p.eft == allow)) && !some(where (p.eft == deny))'

function model(matcher: string, effect = ALLOW_AND_DENY): string {
  return `[request_definition]\nr = sub, dom, obj, act\n\n[policy_definition]\np = sub, dom, obj, act, eft\n\n[role_definition]\ng = _, _, _\n\n[policy_effect]\ne = ${effect}\n\n[matchers]\nm = ${matcher}\n`
}

const ROLE_TIES = '((g(r.sub, p.sub, r.dom) && (p.dom == r.dom || p.dom == "global")) || (g(r.sub, p.sub, "global") && p.dom == "global"))'
const VARIANTS: Array<{ name: string; text: string; mode: string }> = [
  { name: 'the shipped model', text: shipped, mode: 'index' },
  { name: 'obj and act compared in the other order', text: model(SHIPPED_MATCHER.replace('r.obj == p.obj && r.act == p.act', 'r.act == p.act && r.obj == p.obj')), mode: 'candidates' },
  { name: 'the two alternatives swapped', text: model(`r.obj == p.obj && r.act == p.act && ((g(r.sub, p.sub, "global") && p.dom == "global") || (g(r.sub, p.sub, r.dom) && (p.dom == r.dom || p.dom == "global")))`), mode: 'candidates' },
  { name: 'equalities written p == r', text: model(`p.obj == r.obj && p.act == r.act && ${ROLE_TIES}`), mode: 'candidates' },
  { name: 'keyMatch2 on the object', text: model(`keyMatch2(r.obj, p.obj) && r.act == p.act && ${ROLE_TIES}`), mode: 'candidates' },
  { name: 'keyMatch on the action', text: model(`r.obj == p.obj && keyMatch(r.act, p.act) && ${ROLE_TIES}`), mode: 'candidates' },
  { name: 'regexMatch on the object', text: model(`regexMatch(r.obj, p.obj) && r.act == p.act && ${ROLE_TIES}`), mode: 'candidates' },
  { name: 'globMatch on the object', text: model(`globMatch(r.obj, p.obj) && r.act == p.act && ${ROLE_TIES}`), mode: 'candidates' },
  { name: 'no global inheritance', text: model('r.obj == p.obj && r.act == p.act && g(r.sub, p.sub, r.dom) && p.dom == r.dom'), mode: 'candidates' },
  { name: 'a wildcard domain', text: model('r.obj == p.obj && r.act == p.act && g(r.sub, p.sub, r.dom) && (p.dom == r.dom || p.dom == "*")'), mode: 'candidates' },
  { name: 'allow-override', text: model(SHIPPED_MATCHER, 'some(where (p.eft == allow))'), mode: 'candidates' },
  { name: 'deny-override', text: model(SHIPPED_MATCHER, '!some(where (p.eft == deny))'), mode: 'candidates' },
  { name: 'priority (first matching row decides)', text: model(SHIPPED_MATCHER, 'priority(p.eft) || deny'), mode: 'candidates' },
  { name: 'own rows by equality or roles by g', text: model('(r.sub == p.sub || g(r.sub, p.sub, r.dom)) && p.dom == r.dom && keyMatch2(r.obj, p.obj) && r.act == p.act'), mode: 'candidates' },
  { name: 'a role link in any domain', text: model('g(r.sub, p.sub, p.dom) && r.dom == p.dom && r.obj == p.obj && r.act == p.act'), mode: 'candidates' },
  { name: 'no subject tie: outside the family', text: model('r.obj == p.obj && r.act == p.act && p.dom == r.dom'), mode: 'enforce-cache' },
]

const USERS = ['u1', 'u2', 'u3', 'u4']
const ROLES = ['r1', 'r2', 'r3', 'r4']
const DOMAINS = ['global', 'm1', 'm2', '*']
const OBJECTS = ['orders', 'orders/1', '/data/7', 'reports', 'rep.x']
/** Rows may also hold patterns, which the matching functions read. */
const ROW_OBJECTS = [...OBJECTS, 'orders/*', '/data/:id', 'rep.*', '/data/*']
const ACTS = ['read', 'write']
const ROW_ACTS = [...ACTS, 'read*', '*']

/** The users' home domains: two system owners, a merchant user of m1 and one of m2. */
const HOME: Record<string, string> = { u1: 'global', u2: 'global', u3: 'm1', u4: 'm2' }
const ACCOUNTS: Account[] = USERS.map((id) => ({
  id,
  email: `${id}@example.test`,
  name: id,
  phone: null,
  principal_type: HOME[id] === 'global' ? 'system_owner' : 'merchant',
  merchant_id: HOME[id] === 'global' ? null : (HOME[id] as string),
  sub_role_code: 'none',
  parent_role: null,
  created_by: null,
  created_at: new Date(0),
  status: 'active',
  credentials_version: 1,
})) as Account[]
const accounts: AccountSource = {
  peek: (id) => ACCOUNTS.find((a) => a.id === id),
  withSubRole: (code) => ACCOUNTS.filter((a) => a.sub_role_code === code),
  subRoles: () => ['none'],
  all: () => ACCOUNTS,
}

function randomRule(r: ReturnType<typeof random>): ['p' | 'g', string[]] {
  if (r.next() < 0.3) {
    // Users to roles (in their home domain, as the service links them) and roles to roles: hierarchies of several levels.
    const member = r.pick([...USERS, ...ROLES])
    return ['g', [member, r.pick(ROLES), HOME[member] ?? r.pick(DOMAINS.slice(0, 3))]]
  }
  return ['p', [r.pick([...ROLES, ...ROLES, ...USERS]), r.pick(DOMAINS), r.pick(ROW_OBJECTS), r.pick(ROW_ACTS), r.next() < 0.7 ? 'allow' : 'deny']]
}

async function fresh(text: string, engine: PermissionEngine, extra: string[] | null = null): Promise<Enforcer> {
  const { p, g } = engine.loadedRules
  const rows = p.map((row) => [...row])
  if (extra !== null) rows.push(extra)
  return newEnforcer(parseModel(text), new RulesAdapter({ p: rows, g: g.map((row) => [...row]) }))
}

const catalog = OBJECTS.flatMap((obj) => ACTS.map((act) => ({ obj, act, label: obj, group_name: 'g', is_active: true })))
const SEED = 20261125
const WORLDS = Number(process.env.FAMILY_WORLDS ?? 4)

for (const [v, variant] of VARIANTS.entries()) {
  t.test(variant.name, async (t) => {
    let compared = 0
    let mismatches = 0
    const mismatch = (what: string) => {
      if (mismatches++ < 5) t.fail(what)
    }
    for (let world = 0; world < WORLDS; world++) {
      const r = random(SEED + v * 1000 + world)
      const initial = { p: [] as string[][], g: [] as string[][] }
      for (let i = 0; i < 40; i++) {
        const [ptype, values] = randomRule(r)
        const list = initial[ptype]
        if (!list.some((row) => row.join() === values.join())) list.push(values)
      }
      const engine = await PermissionEngine.fromRules(variant.text, initial, { rootRoles: [], catalog })
      t.equal(engine.mode, variant.mode, 'decision mode', { diagnostic: false })
      for (let round = 0; round < 4; round++) {
        const reference = await fresh(variant.text, engine)
        for (const sub of [...USERS, ...ROLES]) {
          const subject: Subject = { id: sub, principal_type: 'system_owner', merchant_id: null, sub_role_code: 'none' }
          for (const dom of DOMAINS) {
            for (const obj of OBJECTS) {
              for (const act of ACTS) {
                const [expected, row] = reference.enforceExSync(sub, dom, obj, act)
                compared++
                if (engine.uncachedModelAllows(sub, dom, obj, act) !== expected) mismatch(`uncached ${sub} ${dom} ${obj} ${act}: expected ${expected}`)
                if (engine.decide(subject, dom, obj, act) !== expected) mismatch(`decide ${sub} ${dom} ${obj} ${act}: expected ${expected}`)
                const why = engine.explain(subject, dom, obj, act)
                if (why.allowed !== expected) mismatch(`explain ${sub} ${dom} ${obj} ${act}: expected ${expected}`)
                if (variant.mode !== 'index' && (why.reason.rule ?? []).join() !== row.join()) mismatch(`explained row ${sub} ${dom} ${obj} ${act}: ${String(why.reason.rule)} vs ${row.join()}`)
              }
            }
          }
        }
        // What the service answers besides checks, for every user: holders lists and check-batch.
        const truth = (enforcer: Enforcer, account: Account, dom: string, obj: string, act: string) =>
          (account.principal_type !== 'merchant' || account.merchant_id === dom) && enforcer.enforceSync(account.id, dom, obj, act)
        for (const dom of DOMAINS) {
          for (const obj of OBJECTS) {
            for (const act of ACTS) {
              compared++
              const holders = permissionHolders(engine, accounts, obj, act, dom).map((h) => h.user_id).sort().join()
              const expected = ACCOUNTS.filter((a) => truth(reference, a, dom, obj, act)).map((a) => a.id).sort().join()
              if (holders !== expected) mismatch(`holders ${dom} ${obj} ${act}: ${holders} vs ${expected}`)
            }
          }
        }
        for (const account of ACCOUNTS) {
          const queries = DOMAINS.flatMap((domain) => OBJECTS.map((obj) => ({ obj, act: r.pick(ACTS), domain })))
          for (const answer of checkPermissions({ engine, accounts }, account, queries)) {
            compared++
            if (answer.allowed !== truth(reference, account, answer.domain, answer.obj, answer.act)) mismatch(`check-batch ${account.id} ${answer.domain} ${answer.obj} ${answer.act}`)
          }
        }
        // A role's dry run of a catalog pair (the service previews no other): the users gaining and losing, against every user decided at home before and after.
        const grant = [r.pick(ROLES), r.pick(DOMAINS), r.pick(OBJECTS), r.pick(ACTS), 'allow']
        if (!engine.loadedRules.p.some((row) => row.join() === grant.join())) {
          const after = await fresh(variant.text, engine, grant)
          const [role, dom, obj, act] = grant as [string, string, string, string]
          const preview = previewChanges(engine, roleReach(engine, accounts, role, dom), obj, act, [{ op: 'add', rule: grant }])
          const home = (a: Account) => HOME[a.id] as string
          const gaining = ACCOUNTS.filter((a) => !truth(reference, a, home(a), obj, act) && truth(after, a, home(a), obj, act)).length
          const losing = ACCOUNTS.filter((a) => truth(reference, a, home(a), obj, act) && !truth(after, a, home(a), obj, act)).length
          compared++
          if (preview.users_gaining !== gaining || preview.users_losing !== losing) mismatch(`preview ${grant.join()}: ${preview.users_gaining}/${preview.users_losing} vs ${gaining}/${losing}`)
        }
        // A dry run: one p row added, asked of a sample of questions.
        const [, extra] = ['p', [r.pick(ROLES), r.pick(DOMAINS), r.pick(ROW_OBJECTS), r.pick(ROW_ACTS), r.next() < 0.6 ? 'allow' : 'deny']] as const
        if (!engine.loadedRules.p.some((row) => row.join() === extra.join())) {
          const after = await fresh(variant.text, engine, [...extra])
          for (let i = 0; i < 40; i++) {
            const sub = r.pick(USERS)
            const [dom, obj, act] = [r.pick(DOMAINS), r.pick(OBJECTS), r.pick(ACTS)]
            const subject: Subject = { id: sub, principal_type: 'system_owner', merchant_id: null, sub_role_code: 'none' }
            compared++
            if (engine.decideAfter(subject, dom, obj, act, [{ op: 'add', rule: [...extra] }]) !== after.enforceSync(sub, dom, obj, act)) mismatch(`preview ${sub} ${dom} ${obj} ${act}`)
          }
        }
        // Random writes: adds and removals of p and g rows.
        for (let i = 0; i < 12; i++) {
          const [ptype, values] = randomRule(r)
          const held = (ptype === 'p' ? engine.loadedRules.p : engine.loadedRules.g).filter((row) => row.length === values.length)
          if (r.next() < 0.4 && held.length > 0) await engine.removeRule(ptype, [...r.pick(held)])
          else await engine.addRule(ptype, values)
        }
      }
    }
    t.equal(mismatches, 0, `${variant.name}: ${compared} decisions compared, ${mismatches} mismatches`)
  })
}
