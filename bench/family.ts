/**
 * npm run bench:family [-- 20000 200000]: uncached in-process decisions a
 * second for edited models of the family (the candidate index) beside the
 * shipped model (the decision index), each question different, at each
 * policy size; and the load time of the policy.
 */
import { readFileSync } from 'node:fs'
import { PermissionEngine } from '../src/engine/engine.js'

const shipped = readFileSync(new URL('../model.conf', import.meta.url), 'utf8')
const MODELS: Array<[string, string]> = [
  ['shipped model.conf', shipped],
  ['r.act == p.act && r.obj == p.obj', shipped.replace('r.obj == p.obj && r.act == p.act', 'r.act == p.act && r.obj == p.obj')],
  ['keyMatch2(r.obj, p.obj)', shipped.replace('r.obj == p.obj', 'keyMatch2(r.obj, p.obj)')],
]
const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0)
const ROLES = 50
const PAIRS = 40

/** `rules` p rows over merchants of ROLES roles with PAIRS pairs each (the last one a deny), one user per role and merchant. */
function policy(rules: number) {
  const merchants = Math.max(1, Math.ceil(rules / (ROLES * PAIRS)))
  const p: string[][] = []
  const g: string[][] = []
  for (let m = 0; m < merchants && p.length < rules; m++) {
    for (let r = 0; r < ROLES && p.length < rules; r++) {
      g.push([`user-${m}-${r}`, `role${r}`, `m${m}`])
      for (let k = 0; k < PAIRS && p.length < rules; k++) p.push([`role${r}`, `m${m}`, `obj${k % 20}`, `act${k}`, k === PAIRS - 1 ? 'deny' : 'allow'])
    }
  }
  return { p, g, merchants }
}

function rate(engine: PermissionEngine, merchants: number, seconds = 1): number {
  let n = 0
  const began = process.hrtime.bigint()
  const limit = BigInt(seconds * 1e9)
  while (process.hrtime.bigint() - began < limit) {
    for (let k = 0; k < 256; k++, n++) {
      const m = (n * 7) % merchants
      engine.uncachedModelAllows(`user-${m}-${n % ROLES}`, `m${m}`, `obj${n % 20}`, `act${(n >> 3) % PAIRS}`)
    }
  }
  return Math.round(n / (Number(process.hrtime.bigint() - began) / 1e9))
}

for (const size of sizes.length > 0 ? sizes : [20_000, 200_000]) {
  const rules = policy(size)
  for (const [name, text] of MODELS) {
    const began = Date.now()
    const engine = await PermissionEngine.fromRules(text, rules)
    const loadMs = Date.now() - began
    rate(engine, rules.merchants, 0.3)
    console.log(`${size} rules | ${name} | ${engine.mode} | ${rate(engine, rules.merchants).toLocaleString('en-US')} decisions/s | load ${loadMs} ms`)
  }
}
