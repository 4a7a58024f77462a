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
import type { RuleChange } from '../../src/engine/decisionIndex.js'
import { explainedKind, reasonOf } from '../../src/engine/explain.js'
import { parseModel } from '../../src/engine/model.js'
import { permissionHolders, type AccountSource } from '../../src/engine/holders.js'
import { previewChanges, roleReach } from '../../src/engine/preview.js'
import { checkPermissions } from '../../src/commands/permissionQueries.js'
import type { Account } from '../../src/domain/principals.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { random } from '../support/seededRandom.js'

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
  credentials_changed_at: null,
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
  const { p } = engine.loadedRules
  const rows = p.map((row) => [...row])
  if (extra !== null) rows.push(extra)
  return freshOver(text, engine, rows)
}

/** A fresh enforcer over `p` and the engine's g rows. */
function freshOver(text: string, engine: PermissionEngine, p: string[][]): Promise<Enforcer> {
  return newEnforcer(parseModel(text), new RulesAdapter({ p, g: engine.loadedRules.g.map((row) => [...row]) }))
}

/** The p list with `changes` applied in order as Casbin's addPolicy and removePolicy would: an add not held is appended, a remove takes the row out. */
function changedList(engine: PermissionEngine, changes: readonly RuleChange[]): string[][] {
  const rows = engine.loadedRules.p.map((row) => [...row])
  for (const { op, rule } of changes) {
    const at = rows.findIndex((row) => row.join() === rule.join())
    if (op === 'add' && at < 0) rows.push([...rule])
    if (op === 'remove' && at >= 0) rows.splice(at, 1)
  }
  return rows
}

/** A dry run's changes: some held rows removed (one of them sometimes added back: it moves to the end of the list), some rows added. */
function randomChanges(r: ReturnType<typeof random>, engine: PermissionEngine): RuleChange[] {
  const changes: RuleChange[] = []
  const held = engine.loadedRules.p
  const removals = Math.floor(r.next() * 3)
  for (let i = 0; i < removals && held.length > 0; i++) changes.push({ op: 'remove', rule: [...r.pick(held)] })
  const first = changes[0]
  if (first !== undefined && r.next() < 0.3) changes.push({ op: 'add', rule: first.rule })
  const adds = 1 + Math.floor(r.next() * 2)
  for (let i = 0; i < adds; i++) {
    // Half the time a held row with the other effect: under priority, its place in the list decides.
    const [sub, dom, obj, act, eft] = held.length > 0 && r.next() < 0.5 ? (r.pick(held) as string[]) : [r.pick(ROLES), r.pick(DOMAINS), r.pick(ROW_OBJECTS), r.pick(ROW_ACTS), r.next() < 0.6 ? 'deny' : 'allow']
    changes.push({ op: 'add', rule: [sub as string, dom as string, obj as string, act as string, eft === 'allow' ? 'deny' : 'allow'] })
  }
  // Sometimes an added row is taken out again by the same dry run.
  const last = changes[changes.length - 1] as RuleChange
  if (r.next() < 0.2) changes.push({ op: 'remove', rule: last.rule })
  return r.next() < 0.5 ? changes : [...changes].reverse()
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
        // Random writes: adds and removals of p and g rows. The first round's come before anything is asked, so
        // an edited model's deferred grants (DecisionIndex.deferringPolicies) are built from rows already changed.
        for (let i = 0; i < 12; i++) {
          const [ptype, values] = randomRule(r)
          const held = (ptype === 'p' ? engine.loadedRules.p : engine.loadedRules.g).filter((row) => row.length === values.length)
          if (r.next() < 0.4 && held.length > 0) await engine.removeRule(ptype, [...r.pick(held)])
          else await engine.addRule(ptype, values)
        }
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
                // Casbin's paths: the reason is the kind of the row enforceEx names (the index's is checked against the plain reading in the differential test).
                const kind = explainedKind(reasonOf(sub, expected, row.length > 0 ? row : null))
                if (variant.mode !== 'index' && why.reason.kind !== kind) mismatch(`reason ${sub} ${dom} ${obj} ${act}: ${why.reason.kind} vs ${kind}`)
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
              const listed = permissionHolders(engine, accounts, obj, act, dom)
              const holders = listed.map((h) => h.user_id).sort().join()
              const expected = ACCOUNTS.filter((a) => truth(reference, a, dom, obj, act)).map((a) => a.id).sort().join()
              if (holders !== expected) mismatch(`holders ${dom} ${obj} ${act}: ${holders} vs ${expected}`)
              // Held as a user when the account's own allow row of the pair reaches the domain, else through a role.
              for (const holder of listed) {
                const own = engine.loadedRules.p.some(
                  (row) => row[0] === holder.user_id && (row[1] === dom || row[1] === 'global') && row[2] === obj && row[3] === act && row[4] === 'allow',
                )
                if (holder.via !== (own ? 'user' : 'role')) mismatch(`holder ${holder.user_id} of ${dom} ${obj} ${act} via ${holder.via}`)
              }
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
        // Dry runs: rows added and removed, each asked of a sample of questions.
        for (let run = 0; run < 3; run++) {
          const changes = randomChanges(r, engine)
          const after = await freshOver(variant.text, engine, changedList(engine, changes))
          for (let i = 0; i < 40; i++) {
            // Half the questions are about a changed row's own subject and fields.
            const [rowSub, rowDom, rowObj, rowAct] = i % 2 === 0 ? r.pick(changes).rule : []
            const sub = rowSub ?? r.pick([...USERS, ...ROLES])
            const dom = rowDom ?? r.pick(DOMAINS)
            const obj = rowObj !== undefined && OBJECTS.includes(rowObj) ? rowObj : r.pick(OBJECTS)
            const act = rowAct !== undefined && ACTS.includes(rowAct) ? rowAct : r.pick(ACTS)
            const subject: Subject = { id: sub, principal_type: 'system_owner', merchant_id: null, sub_role_code: 'none' }
            compared++
            if (engine.decideAfter(subject, dom, obj, act, changes) !== after.enforceSync(sub, dom, obj, act)) mismatch(`dry run ${JSON.stringify(changes)}: ${sub} ${dom} ${obj} ${act}`)
          }
        }
      }
    }
    t.equal(mismatches, 0, `${variant.name}: ${compared} decisions compared, ${mismatches} mismatches`)
  })
}

/**
 * The speed class of holders for an edited model: with a no-match answer of
 * false, only the subjects of rows the question may match and the members
 * reaching them are decided, never every account; with a deny-override
 * effect (a user with no matching row is allowed) every account is.
 */
t.test('holders of an edited model decide the accounts its rows reach, not every account', async (t) => {
  const bystanders: Account[] = Array.from({ length: 200 }, (_, i) => ({ ...(ACCOUNTS[0] as Account), id: `x${i}`, email: `x${i}@example.test` }))
  const everyone = [...ACCOUNTS, ...bystanders]
  let listed = 0
  let peeked = 0
  const recording: AccountSource = {
    peek: (id) => {
      peeked++
      return everyone.find((a) => a.id === id)
    },
    withSubRole: () => [],
    subRoles: () => ['none'],
    all: () => {
      listed++
      return everyone
    },
  }
  // A role-to-role hierarchy (u1 → r1 → r2) and a keyMatch2 pattern on the object: six subjects and members at most (r1, r2, r3, u1, u3, u4), none of the 200 bystanders.
  const rules = {
    p: [
      ['r2', 'global', '/data/:id', 'read', 'allow'],
      ['u3', 'm1', '/data/*', 'read', 'allow'],
      ['r3', 'm2', 'orders', 'read', 'allow'],
    ],
    g: [
      ['u1', 'r1', 'global'],
      ['r1', 'r2', 'global'],
      ['u4', 'r3', 'm2'],
    ],
  }
  const questions = [['global', '/data/7', 'read'], ['m1', '/data/7', 'read'], ['m2', 'orders', 'read'], ['m1', 'reports', 'write']] as const
  for (const [name, text] of [
    ['keyMatch2 on the object', model(`keyMatch2(r.obj, p.obj) && r.act == p.act && ${ROLE_TIES}`)],
    ['deny-override', model(SHIPPED_MATCHER, '!some(where (p.eft == deny))')],
  ] as const) {
    const engine = await PermissionEngine.fromRules(text, rules, { rootRoles: [], catalog })
    const reference = await newEnforcer(parseModel(text), new RulesAdapter(rules))
    const linear = name === 'deny-override'
    for (const [dom, obj, act] of questions) {
      listed = 0
      peeked = 0
      const holders = permissionHolders(engine, recording, obj, act, dom).map((h) => h.user_id).sort().join()
      const expected = everyone.filter((a) => (a.principal_type !== 'merchant' || a.merchant_id === dom) && reference.enforceSync(a.id, dom, obj, act)).map((a) => a.id).sort().join()
      t.equal(holders, expected, `${name}: holders of ${obj} ${act} in ${dom}`)
      if (linear) t.equal(listed, 1, `${name}: every account is decided for ${obj} ${act} in ${dom}`)
      else t.ok(listed === 0 && peeked <= 6, `${name}: ${peeked} accounts looked up for ${obj} ${act} in ${dom}, the list of all never read`)
    }
  }
})
