import { GLOBAL_DOMAIN } from '../domain/principals.js'
import type { PermissionEngine } from './engine.js'

/** A measurement stops after this long (or MEASURE_QUESTIONS questions): it runs at every start. */
const MEASURE_BUDGET_MS = 200
export const MEASURE_QUESTIONS = 20_000
/** Names of each kind taken from the policy to build questions from. */
const SAMPLED = 200

/** Questions between clock reads at most: index decisions take well under a microsecond, and the clock must stay out of what is measured. */
const MAX_BATCH = 64
/** A batch shorter than this (ns) doubles: a path that takes longer per question reads the clock after each. */
const SHORT_BATCH_NS = 20_000n

export interface DecisionCost {
  mode: PermissionEngine['mode']
  /** The decision path in words, for logs and the CLI. */
  path: string
  /** Why the model gets that path, in words ('' when that needs no saying). */
  why: string
  /** Whether an uncached decision scans every row (its cost grows with the policy). */
  scansEveryRow: boolean
  pRules: number
  gRules: number
  questions: number
  /** Uncached decisions a second on this policy, each question different; rounded. */
  perSecond: number
}

const distinct = (values: Iterable<string | undefined>): string[] => {
  const kept = new Set<string>()
  for (const value of values) {
    if (value !== undefined && value !== '') kept.add(value)
    if (kept.size >= SAMPLED) break
  }
  return [...kept]
}

/**
 * Times the engine's uncached model decisions (what a question costs right
 * after a write) on questions built from the loaded policy's own names:
 * members and subjects, domains, pairs, combined so that each question
 * differs from the last. Bounded by MEASURE_BUDGET_MS (at least one
 * question is asked, however long it takes).
 */
export function measureDecisionCost(engine: PermissionEngine, budgetMs = MEASURE_BUDGET_MS): DecisionCost {
  const { p, g } = engine.loadedRules
  const subjects = distinct([...g.slice(0, SAMPLED * 4).map((r) => r[0]), ...p.slice(0, SAMPLED * 4).map((r) => r[0])])
  const domains = distinct([GLOBAL_DOMAIN, ...p.slice(0, SAMPLED * 4).map((r) => r[1]), ...g.slice(0, SAMPLED * 4).map((r) => r[2])])
  const pairs = p.slice(0, SAMPLED * 4).map((r) => [r[2] ?? '', r[3] ?? ''] as const)
  if (subjects.length === 0) subjects.push('nobody')
  if (pairs.length === 0) pairs.push(['nothing', 'none'])
  const ask = (i: number) => {
    const sub = subjects[i % subjects.length] as string
    const dom = domains[Math.floor(i / subjects.length) % domains.length] as string
    const [obj, act] = pairs[(i * 7919) % pairs.length] as readonly [string, string]
    engine.uncachedModelAllows(sub, dom, obj, act)
  }
  const run = (budget: number, from: number): { questions: number; seconds: number } => {
    const began = process.hrtime.bigint()
    const limit = BigInt(Math.round(budget * 1e6))
    let questions = 0
    let elapsed = 0n
    let batch = 1
    while (questions < MEASURE_QUESTIONS) {
      for (let k = 0; k < batch && questions < MEASURE_QUESTIONS; k++, questions++) ask(from + questions)
      const before = elapsed
      elapsed = process.hrtime.bigint() - began
      if (elapsed >= limit) break
      if (elapsed - before < SHORT_BATCH_NS && batch < MAX_BATCH) batch *= 2
    }
    return { questions, seconds: Number(elapsed) / 1e9 }
  }
  // The first questions pay for compiling the code they run: a quarter of the budget warms up, uncounted.
  const warm = run(budgetMs / 4, 0)
  const { questions, seconds } = run((budgetMs * 3) / 4, warm.questions)
  return {
    mode: engine.mode,
    path: engine.pathWords.how,
    why: engine.pathWords.why,
    scansEveryRow: engine.pathWords.scansEveryRow,
    pRules: p.length,
    gRules: g.length,
    questions,
    perSecond: Math.round(questions / Math.max(seconds, 1e-9)),
  }
}

/** The path and its measured cost at this policy's size, in words: one line for the start-up log and `model check`. */
export function describeDecisionCost(cost: DecisionCost): string {
  const rate = cost.perSecond.toLocaleString('en-US')
  const size = `${cost.pRules.toLocaleString('en-US')} p rules and ${cost.gRules.toLocaleString('en-US')} g rules`
  return `${cost.why}decisions will use ${cost.path}: ${rate} uncached decisions a second, measured at ${size}`
}
