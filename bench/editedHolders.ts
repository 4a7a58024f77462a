/**
 * npm run bench:edited-holders [-- RULES USERS]: who holds a pair and a
 * role's dry run, for the shipped model (the decision index) and edited
 * models of the family (the candidate index), in one process over the same
 * rows held in memory (default 200,000 role grants over 100 merchants and
 * 100,000 merchant users, each linked to one role in its merchant). Each
 * figure is taken right after a write, so no decision is cached. The
 * deny-override model allows a user no row matches: its holders decide
 * every account, the linear figure the others are compared with. The
 * last column is one enforce() over the whole list: what each dry-run
 * decision of an edited model cost when the change was laid over the list.
 */
import { cpus } from 'node:os'
import { readFileSync } from 'node:fs'
import type { Account } from '../src/domain/principals.js'
import { PermissionEngine } from '../src/engine/engine.js'
import { permissionHolders, type AccountSource } from '../src/engine/holders.js'
import { previewChanges, roleReach } from '../src/engine/preview.js'
import type { RuleChange } from '../src/engine/decisionIndex.js'

const RULES = Number(process.argv[2] ?? 200_000)
const USERS = Number(process.argv[3] ?? 100_000)
const ROLES = 50
const PAIRS = 40
const RUNS = 11

const shipped = readFileSync(new URL('../model.conf', import.meta.url), 'utf8')
const MODELS: Array<[string, string]> = [
  ['shipped model.conf', shipped],
  ['r.act == p.act && r.obj == p.obj', shipped.replace('r.obj == p.obj && r.act == p.act', 'r.act == p.act && r.obj == p.obj')],
  ['keyMatch2(r.obj, p.obj)', shipped.replace('r.obj == p.obj', 'keyMatch2(r.obj, p.obj)')],
  ['deny-override effect (holders stay linear)', shipped.replace(/^e = .*$/m, 'e = !some(where (p.eft == deny))')],
]

const merchants = Math.max(1, Math.ceil(RULES / (ROLES * PAIRS)))
const p: string[][] = []
for (let m = 0; m < merchants && p.length < RULES; m++) {
  for (let r = 0; r < ROLES && p.length < RULES; r++) {
    for (let k = 0; k < PAIRS && p.length < RULES; k++) p.push([`role${r}`, `m${m}`, `obj${k % 20}`, `act${k}`, k === PAIRS - 1 ? 'deny' : 'allow'])
  }
}
const accounts: Account[] = []
const g: string[][] = []
for (let i = 0; i < USERS; i++) {
  const merchant = `m${i % merchants}`
  const role = `role${Math.floor(i / merchants) % ROLES}`
  accounts.push({
    id: `user-${i}`,
    email: `user-${i}@bench.test`,
    name: `User ${i}`,
    phone: null,
    principal_type: 'merchant',
    merchant_id: merchant,
    sub_role_code: role,
    parent_role: 'system_owner',
    created_by: null,
    created_at: new Date(0),
    status: 'active',
    credentials_version: 1,
    must_change_password: false,
    credentials_changed_at: null,
  })
  g.push([`user-${i}`, role, merchant])
}
const byId = new Map(accounts.map((a) => [a.id, a]))
const source: AccountSource = {
  peek: (id) => byId.get(id),
  withSubRole: (code) => accounts.filter((a) => a.sub_role_code === code),
  subRoles: () => Array.from({ length: ROLES }, (_, r) => `role${r}`),
  all: () => accounts,
}
const catalog = Array.from({ length: PAIRS }, (_, k) => ({ obj: `obj${k % 20}`, act: `act${k}`, label: '', group_name: '', is_active: true }))

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number

/** The median time of `work` over RUNS runs, each right after a write (which empties the decision cache). */
async function timed(engine: PermissionEngine, work: () => unknown): Promise<number> {
  const times: number[] = []
  const touch = ['nobody', 'm0', 'obj0', 'act0', 'allow']
  for (let i = 0; i < RUNS; i++) {
    await engine.addRule('p', touch)
    await engine.removeRule('p', touch)
    const began = performance.now()
    work()
    times.push(performance.now() - began)
  }
  return median(times)
}

// role7 in m3 gains obj6:act5 (held by no role) and loses obj0:act0.
const changes: RuleChange[] = [
  { op: 'add', rule: ['role7', 'm3', 'obj6', 'act5', 'allow'] },
  { op: 'remove', rule: ['role7', 'm3', 'obj0', 'act0', 'allow'] },
]
const started = new Date()
const rows: string[] = []
for (const [name, text] of MODELS) {
  const engine = await PermissionEngine.fromRules(text, { p, g }, { rootRoles: [], catalog })
  let holders = 0
  const holdersMs = await timed(engine, () => (holders = permissionHolders(engine, source, 'obj0', 'act0', 'm3').length))
  let reached = 0
  let gaining = 0
  let losing = 0
  const previewMs = await timed(engine, () => {
    const reach = roleReach(engine, source, 'role7', 'm3')
    reached = reach.length
    for (const [obj, act] of [
      ['obj6', 'act5'],
      ['obj0', 'act0'],
    ] as const) {
      const preview = previewChanges(engine, reach, obj, act, changes)
      gaining += preview.users_gaining
      losing += preview.users_losing
    }
  })
  // What one dry-run decision cost when it ran Casbin's enforce() over the whole list.
  const scanMs = await timed(engine, () => engine.enforce('user-3', 'm3', 'obj0', 'act0'))
  rows.push(
    `| ${name} | ${engine.mode} | ${fmt(holdersMs, 2)} ms (${fmt(holders)} holders) | ${fmt(previewMs, 2)} ms (${fmt(reached)} users reached, ${fmt(gaining / RUNS)} gain, ${fmt(losing / RUNS)} lose) | ${fmt(scanMs, 2)} ms |`,
  )
  process.stderr.write(`${rows[rows.length - 1]}\n`)
}

process.stdout.write(
  [
    `command: npm run bench:edited-holders -- ${RULES} ${USERS}`,
    `date: ${started.toISOString()}, Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}`,
    `${fmt(p.length)} role grants over ${fmt(merchants)} merchants, ${fmt(USERS)} accounts; median of ${RUNS} runs, each right after a write`,
    '',
    '| model | path | holders of obj0:act0 in m3 | role7 dry run in m3 (one add, one remove; two pairs) | one enforce() over the whole list |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
)
