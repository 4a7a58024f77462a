/**
 * npm run bench:family [-- 1000 20000 200000 1000000]: for the shipped model
 * (the decision index) and edited models of the family (the candidate index
 * with the compiled matcher), at each policy size: uncached in-process
 * decisions a second, each question different, asked by users of every
 * merchant and by the users of one merchant; the cold load time of the
 * policy; the heap it holds per rule; what a write costs in memory (the
 * event loop is held that long): the median over WRITES stored p rows of
 * removing one and of adding it back, and the same for g rows. Each model
 * and size runs in a process of its own, so one model's compiled code and
 * garbage do not weigh on the next. A last line gives, per model, the
 * decisions a second at the smallest size over those at the largest.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { PermissionEngine } from '../src/engine/engine.js'
import { EDITED_MATCHER, editedModelText } from './editedModel.js'

const shipped = readFileSync(new URL('../model.conf', import.meta.url), 'utf8')
const MODELS: Array<[string, string]> = [
  ['shipped model.conf', shipped],
  [EDITED_MATCHER, editedModelText()],
  ['keyMatch2(r.obj, p.obj)', shipped.replace('r.obj == p.obj', 'keyMatch2(r.obj, p.obj)')],
]
/** Stored rows written per kind (p, g): each removed, then added back. */
const WRITES = 21
const ROLES = 50
const PAIRS = 40

/** `rules` p rows over merchants of ROLES roles with PAIRS pairs each (the last one a deny), one user per role and merchant. */
function policy(rules: number) {
  const merchants = Math.max(1, Math.ceil(rules / (ROLES * PAIRS)))
  const p: string[][] = []
  const g: string[][] = []
  // One string per value, as the storage adapter loads them: a row's fields are shared strings, not a million copies.
  const pool = new Map<string, string>()
  const one = (value: string): string => pool.get(value) ?? (pool.set(value, value), value)
  for (let m = 0; m < merchants && p.length < rules; m++) {
    for (let r = 0; r < ROLES && p.length < rules; r++) {
      g.push([`user-${m}-${r}`, one(`role${r}`), one(`m${m}`)])
      for (let k = 0; k < PAIRS && p.length < rules; k++) p.push([one(`role${r}`), one(`m${m}`), one(`obj${k % 20}`), one(`act${k}`), k === PAIRS - 1 ? 'deny' : 'allow'])
    }
  }
  return { p, g, merchants }
}

/**
 * Questions built beforehand (every one different from the last), so the
 * clock measures decisions, not string building: from users of every
 * merchant (`merchants` of them), or of the first `merchants` only.
 */
function questions(merchants: number, count: number): string[][] {
  const out: string[][] = []
  for (let n = 0; n < count; n++) {
    const m = (n * 7919) % merchants
    const k = (n * 31) % PAIRS
    // Half the questions name a pair the role holds, half a pair nobody holds.
    out.push([`user-${m}-${n % ROLES}`, `m${m}`, `obj${n % 2 === 0 ? k % 20 : (k + 1) % 20}`, `act${k}`])
  }
  return out
}

function rate(engine: PermissionEngine, asked: string[][], seconds: number): number {
  let n = 0
  const began = process.hrtime.bigint()
  const limit = BigInt(Math.round(seconds * 1e9))
  while (process.hrtime.bigint() - began < limit) {
    for (let k = 0; k < 256; k++, n++) {
      const [sub, dom, obj, act] = asked[n % asked.length] as [string, string, string, string]
      engine.uncachedModelAllows(sub, dom, obj, act)
    }
  }
  return Math.round(n / (Number(process.hrtime.bigint() - began) / 1e9))
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number

/** Milliseconds `write` holds the event loop for. */
async function timed(write: () => Promise<void>): Promise<number> {
  const began = process.hrtime.bigint()
  await write()
  return Number(process.hrtime.bigint() - began) / 1e6
}

/** Median milliseconds of removing each of `rows` (stored rows spread over the list) and of adding it back. */
async function writeCost(engine: PermissionEngine, ptype: 'p' | 'g', stored: readonly string[][]): Promise<{ remove: number; add: number }> {
  const removes: number[] = []
  const adds: number[] = []
  for (let i = 0; i < WRITES; i++) {
    const row = stored[Math.floor(((i * 7919) % WRITES) * (stored.length / WRITES))] as string[]
    removes.push(await timed(() => engine.removeRule(ptype, row)))
    adds.push(await timed(() => engine.addRule(ptype, row)))
  }
  return { remove: median(removes), add: median(adds) }
}

const ms = (value: number): string => (value < 1 ? value.toFixed(3) : value.toFixed(1))

/** The heap in use with the memory of typed arrays, which lies outside it (the candidate index's tables). */
const heap = (): number => {
  globalThis.gc?.()
  const { heapUsed, external } = process.memoryUsage()
  return heapUsed + external
}

/** What a load leaves to the background (row tables, an edited model's grants) is done a slice per turn: lets it finish. */
async function backgroundDone(): Promise<void> {
  for (let turn = 0; turn < 400; turn++) await new Promise((resolve) => setImmediate(resolve))
}

/** An engine of `size` rules of a model, its background work done. */
async function loaded(size: number, text: string): Promise<{ engine: PermissionEngine; merchants: number }> {
  const rules = policy(size)
  const engine = await PermissionEngine.fromRules(text, rules)
  await backgroundDone()
  return { engine, merchants: rules.merchants }
}

/** This script run with `args` in a process of its own (so one model's compiled code and garbage do not weigh on the next): its last line, parsed. */
function inChild<T>(args: string[]): T {
  const out = execFileSync(process.execPath, ['--expose-gc', '--max-old-space-size=8192', '--import', 'tsx', fileURLToPath(import.meta.url), ...args], { encoding: 'utf8' })
  return JSON.parse(out.trim().split('\n').pop() as string) as T
}

if (process.argv[2] === '--paired') {
  // Two engines of one model in one process, the smallest and the largest size, asked in turn (0.4 s each, seven times):
  // both sides of each ratio see the same machine, as the main bench measures the shipped model's 1k / 1M.
  const [, text] = MODELS[Number(process.argv[3])] as [string, string]
  const small = await loaded(Number(process.argv[4]), text)
  const large = await loaded(Number(process.argv[5]), text)
  const inOne = questions(1, 100_000)
  const everyLarge = questions(large.merchants, 100_000)
  const everySmall = questions(small.merchants, 100_000)
  const inOneRatios: number[] = []
  const everyRatios: number[] = []
  for (let i = 0; i < 7; i++) {
    inOneRatios.push(rate(small.engine, inOne, 0.4) / rate(large.engine, inOne, 0.4))
    everyRatios.push(rate(small.engine, everySmall, 0.4) / rate(large.engine, everyLarge, 0.4))
  }
  console.log(JSON.stringify({ inOne: median(inOneRatios), every: median(everyRatios) }))
} else if (process.argv[2] === '--one') {
  const size = Number(process.argv[3])
  const [, text] = MODELS[Number(process.argv[4])] as [string, string]
  const rules = policy(size)
  const asked = questions(rules.merchants, 100_000)
  // The users of one merchant, at every size: what a decision costs apart from the caches a larger heap misses.
  const askedInOne = questions(1, 100_000)
  const before = heap()
  const began = process.hrtime.bigint()
  const engine = await PermissionEngine.fromRules(text, rules)
  const loadMs = Number(process.hrtime.bigint() - began) / 1e6
  await backgroundDone()
  // The rows handed in are the engine's own now (it keeps them): what it holds beyond the question list is its heap.
  const bytes = heap() - before
  rate(engine, asked, 0.5)
  const perSecond = rate(engine, asked, 2)
  rate(engine, askedInOne, 0.5)
  const inOnePerSecond = rate(engine, askedInOne, 2)
  // Copies: the engine keeps the rows it was given, and a removal must not empty the row being written back.
  const p = await writeCost(engine, 'p', rules.p.map((row) => [...row]))
  const g = await writeCost(engine, 'g', rules.g.map((row) => [...row]))
  console.log(JSON.stringify({ mode: engine.mode, perSecond, inOnePerSecond, loadMs: Math.round(loadMs), bytesPerRule: Math.round(bytes / size), p, g }))
} else {
  const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0)
  console.log(`${new Date().toISOString()} node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'})`)
  console.log(
    '| rules | model | path | uncached decisions/s, users of every merchant | uncached decisions/s, users of one merchant | cold load | heap per rule | p write: remove / add back | g write: remove / add back |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|')
  const chosen = sizes.length > 0 ? sizes : [1_000, 20_000, 200_000, 1_000_000]
  const rates = new Map<string, number[]>()
  const inOneRates = new Map<string, number[]>()
  for (const size of chosen) {
    for (const [i, [name]] of MODELS.entries()) {
      type Write = { remove: number; add: number }
      const row = inChild<{
        mode: string
        perSecond: number
        inOnePerSecond: number
        loadMs: number
        bytesPerRule: number
        p: Write
        g: Write
      }>(['--one', String(size), String(i)])
      rates.set(name, [...(rates.get(name) ?? []), row.perSecond])
      inOneRates.set(name, [...(inOneRates.get(name) ?? []), row.inOnePerSecond])
      console.log(
        `| ${size.toLocaleString('en-US')} | ${name} | ${row.mode} | ${row.perSecond.toLocaleString('en-US')} | ${row.inOnePerSecond.toLocaleString('en-US')} | ${row.loadMs.toLocaleString('en-US')} ms | ${row.bytesPerRule} B | ${ms(row.p.remove)} / ${ms(row.p.add)} ms | ${ms(row.g.remove)} / ${ms(row.g.add)} ms |`,
      )
    }
  }
  if (chosen.length > 1) {
    const ratios = (of: Map<string, number[]>) =>
      [...of].map(([name, perSecond]) => `${name} ${((perSecond[0] as number) / (perSecond[perSecond.length - 1] as number)).toFixed(2)}`).join('; ')
    const sizesApart = `${chosen[0]?.toLocaleString('en-US')} rules over those at ${chosen[chosen.length - 1]?.toLocaleString('en-US')}`
    console.log(`\nDecisions a second at ${sizesApart}, users of every merchant: ${ratios(rates)}`)
    console.log(`Decisions a second at ${sizesApart}, users of one merchant: ${ratios(inOneRates)}`)
    // The same ratios with both engines in one process, asked in turn: the figures above come from processes run minutes apart.
    const [smallest, largest] = [Math.min(...chosen), Math.max(...chosen)]
    const paired = MODELS.map(([name], i) => {
      const { inOne, every } = inChild<{ inOne: number; every: number }>(['--paired', String(i), String(smallest), String(largest)])
      return `${name} ${inOne.toFixed(2)} (every merchant's users: ${every.toFixed(2)})`
    })
    console.log(`Asked in turn in one process (median of 7), ${smallest.toLocaleString('en-US')} rules over ${largest.toLocaleString('en-US')}, users of one merchant: ${paired.join('; ')}`)
  }
}
