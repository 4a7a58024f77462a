import { DefaultEffector, Effect, FunctionMap, type Model } from 'casbin'
import type { MatcherNode, MatcherReading } from './matcherAnalysis.js'

/** A role function as the matcher calls it (Casbin's g, g2, ...). */
export type RoleFunction = (...args: unknown[]) => boolean

/** The matcher compiled to a closure over one request and one p row. */
type Eval = (r: readonly string[], p: readonly string[]) => unknown

/**
 * The effects whose answer depends on the matching rows in list order only.
 * subjectPriority is left out: Casbin sorts its list by the role hierarchy.
 */
const EFFECTS = new Set(['some(where (p_eft == allow))', '!some(where (p_eft == deny))', 'some(where (p_eft == allow)) && !some(where (p_eft == deny))', 'priority(p_eft) || deny'])

/** The operators compiled, each as expression-eval applies it. */
const BINARY: Record<string, (a: unknown, b: unknown) => unknown> = {
  // Casbin's evaluator compares with == (loosely), so the compiled matcher does too.
  '==': (a, b) => a == b,
  '!=': (a, b) => a != b,
  '===': (a, b) => a === b,
  '!==': (a, b) => a !== b,
  '&&': (a, b) => a && b,
  '||': (a, b) => a || b,
}

type Node = MatcherNode

/**
 * One node of the matcher's tree as a closure, evaluated as
 * @casbin/expression-eval evaluates it; null for anything not known here
 * (the caller then leaves the model to Casbin).
 */
function compileNode(node: Node, slots: Map<string, ['r' | 'p', number]>, functions: Map<string, (...args: unknown[]) => unknown>): Eval | null {
  switch (node.type) {
    case 'Literal': {
      const value = node.value
      return () => value
    }
    case 'Identifier': {
      const slot = slots.get(node.name ?? '')
      if (slot === undefined) return null
      const [side, at] = slot
      return side === 'r' ? (r) => r[at] : (_r, p) => p[at]
    }
    case 'UnaryExpression': {
      const argument = node.argument === undefined ? null : compileNode(node.argument, slots, functions)
      if (node.operator !== '!' || argument === null) return null
      return (r, p) => !argument(r, p)
    }
    case 'LogicalExpression':
    case 'BinaryExpression': {
      const op = BINARY[node.operator ?? '']
      const left = node.left === undefined ? null : compileNode(node.left, slots, functions)
      const right = node.right === undefined ? null : compileNode(node.right, slots, functions)
      if (op === undefined || left === null || right === null) return null
      // A logical node stops early, as the evaluator does; a binary one evaluates both sides first (a function may throw).
      if (node.type === 'LogicalExpression' && node.operator === '&&') return (r, p) => left(r, p) && right(r, p)
      if (node.type === 'LogicalExpression' && node.operator === '||') return (r, p) => left(r, p) || right(r, p)
      if (node.type === 'LogicalExpression') return null
      return (r, p) => op(left(r, p), right(r, p))
    }
    case 'CallExpression': {
      const fn = node.callee?.type === 'Identifier' ? functions.get(node.callee.name ?? '') : undefined
      const args = (node.arguments ?? []).map((a) => compileNode(a, slots, functions))
      if (fn === undefined || args.some((a) => a === null)) return null
      const compiled = args as Eval[]
      if (compiled.length === 2) {
        const [a, b] = compiled as [Eval, Eval]
        return (r, p) => fn(a(r, p), b(r, p))
      }
      if (compiled.length === 3) {
        const [a, b, c] = compiled as [Eval, Eval, Eval]
        return (r, p) => fn(a(r, p), b(r, p), c(r, p))
      }
      return (r, p) => fn(...compiled.map((a) => a(r, p)))
    }
    default:
      return null
  }
}

/** Answers kept per matching function before it starts again. */
const REMEMBERED = 10_000

/**
 * A Casbin matching function with its answers kept for two string
 * arguments: they are pure (keyMatch2 and regexMatch build a regular
 * expression per call, which would cost more than the rest of a
 * decision). A call that throws keeps nothing, so it throws again.
 */
function remembered(fn: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  // First argument → second → answer: strings keep their hash, so a look-up builds no key string.
  let kept = new Map<string, Map<string, unknown>>()
  let size = 0
  return (...args: unknown[]) => {
    const [a, b] = args
    if (args.length !== 2 || typeof a !== 'string' || typeof b !== 'string') return fn(...args)
    let byB = kept.get(a)
    if (byB === undefined) {
      byB = new Map()
      kept.set(a, byB)
    }
    let answer = byB.get(b)
    if (answer === undefined && !byB.has(b)) {
      answer = fn(a, b)
      if (size >= REMEMBERED) {
        kept = new Map([[a, (byB = new Map())]])
        size = 0
      }
      byB.set(b, answer)
      size++
    }
    return answer
  }
}

/** Casbin's reading of the matcher's result for one row (privateEnforce), before the row's eft. */
function effectOf(result: unknown): Effect {
  switch (typeof result) {
    case 'boolean':
      return result ? Effect.Allow : Effect.Indeterminate
    case 'number':
      return result === 0 ? Effect.Indeterminate : (result as Effect)
    case 'string':
      return result === '' ? Effect.Indeterminate : Effect.Allow
    default:
      throw new Error('matcher result should only be of type boolean, number, or string')
  }
}

/**
 * The model's matcher and effect, compiled once: Casbin's decision over a
 * list of p rows without Casbin's per-row context objects. The matcher is
 * the tree Casbin itself evaluates (its parser, after its bracket rewrite),
 * its functions are Casbin's own (keyMatch…, regexMatch, globMatch,
 * ipMatch), the effect is Casbin's effector stream, so the answer and the
 * row an explanation names are Casbin's over the same rows in the same order.
 */
export class CompiledModel {
  private readonly effector = new DefaultEffector()

  private constructor(
    private readonly matcher: Eval,
    private readonly effect: string,
    /** Where a row holds its eft (Casbin reads `p_eft` by the token's place). */
    private readonly eftAt: number,
  ) {}

  /**
   * null when the model holds anything this does not compile (an eval(), a
   * member access, an operator or function it does not know, an effect
   * whose order is not the list's): such a model is left to Casbin.
   */
  static compile(model: Model, matcher: MatcherReading, roleFunctions: ReadonlyMap<string, RoleFunction>): CompiledModel | null {
    const effect = model.model.get('e')?.get('e')?.value
    const rTokens = model.model.get('r')?.get('r')?.tokens ?? []
    const pTokens = model.model.get('p')?.get('p')?.tokens ?? []
    if (matcher.tree === null || effect === undefined || !EFFECTS.has(effect)) return null
    if (pTokens[pTokens.length - 1] !== 'p_eft') return null
    const slots = new Map<string, ['r' | 'p', number]>()
    rTokens.forEach((token, i) => slots.set(token, ['r', i]))
    pTokens.forEach((token, i) => slots.set(token, ['p', i]))
    const functions = new Map<string, (...args: unknown[]) => unknown>()
    for (const [name, fn] of FunctionMap.loadFunctionMap().getFunctions() as Map<string, (...args: unknown[]) => unknown>) functions.set(name, remembered(fn))
    for (const [name, fn] of roleFunctions) functions.set(name, fn)
    const evaluate = compileNode(matcher.tree, slots, functions)
    return evaluate === null ? null : new CompiledModel(evaluate, effect, pTokens.length - 1)
  }

  /** The row the last decide() named (the one enforceEx would name), or null: read right after, so a decision allocates nothing. */
  named: readonly string[] | null = null

  /**
   * Casbin's answer over `rows` (a non-empty list in the model's order, or
   * a superset of its rows that can match, in that order); the row an
   * enforceEx would name is left in `named`.
   */
  decide(request: readonly string[], rows: ReadonlyArray<readonly string[]>): boolean {
    const stream = this.effector.newStream(this.effect)
    let named: readonly string[] | null = null
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i] as readonly string[]
      let effect = effectOf(this.matcher(request, row))
      const eft = row[this.eftAt]
      if (eft && effect === Effect.Allow) effect = eft === 'allow' ? Effect.Allow : eft === 'deny' ? Effect.Deny : Effect.Indeterminate
      const [, rec, done] = stream.pushEffect(effect)
      if (rec) named = row
      if (done) break
    }
    this.named = named
    return stream.current()
  }

  /** The answer over a non-empty list none of whose rows matches. */
  noMatch(): boolean {
    const stream = this.effector.newStream(this.effect)
    stream.pushEffect(Effect.Indeterminate)
    return stream.current()
  }
}
