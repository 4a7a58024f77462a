import expressionEval from '@casbin/expression-eval'
import { Util, type Model } from 'casbin'

/** The request fields the API sends (r = sub, dom, obj, act). */
const REQUEST_FIELDS = ['sub', 'dom', 'obj', 'act'] as const
export type Field = (typeof REQUEST_FIELDS)[number]

/** Where a pinned policy field's value comes from: a request field or a string in the matcher. */
export type Pin = { from: 'request'; field: Field } | { from: 'literal'; value: string }

/**
 * One alternative of the matcher (a conjunction once the matcher is put in
 * disjunctive form) as far as it narrows the rows: the subject's tie to the
 * requester and the policy fields it pins by equality. Everything else it
 * says is left to Casbin's own evaluation over the candidate rows.
 */
export interface Alternative {
  /** `r.sub == p.sub` ('exact'), or `g(r.sub, p.sub, D)` with D a request field, a literal, or anything else ('any' domain). */
  subject: { kind: 'exact' } | { kind: 'role'; domain: Pin | 'any' }
  /** p.dom, p.obj, p.act pinned to one value each (sub is the subject's). */
  pins: Partial<Record<Exclude<Field, 'sub'>, Pin>>
}

/** Alternatives beyond this many: the matcher is not narrowed (the disjunctive form grows with every `||`). */
const MAX_ALTERNATIVES = 64

/** jsep's node shapes (the tree Casbin's expression parser gives), as far as they are read here and by compiledModel.ts. */
export interface MatcherNode {
  type: string
  operator?: string
  left?: MatcherNode
  right?: MatcherNode
  argument?: MatcherNode
  name?: string
  value?: unknown
  callee?: MatcherNode
  arguments?: MatcherNode[]
  elements?: MatcherNode[]
  object?: MatcherNode
}

/** The matcher as a disjunction of conjunctions of atoms; null beyond MAX_ALTERNATIVES. */
function disjunctiveForm(node: MatcherNode): MatcherNode[][] | null {
  if ((node.type === 'LogicalExpression' || node.type === 'BinaryExpression') && (node.operator === '||' || node.operator === '&&')) {
    const left = disjunctiveForm(node.left as MatcherNode)
    const right = disjunctiveForm(node.right as MatcherNode)
    if (left === null || right === null) return null
    const out = node.operator === '||' ? [...left, ...right] : left.flatMap((l) => right.map((r) => [...l, ...r]))
    return out.length > MAX_ALTERNATIVES ? null : out
  }
  return [[node]]
}

const fieldOf = (node: MatcherNode | undefined, prefix: 'r' | 'p'): Field | null => {
  if (node?.type !== 'Identifier' || typeof node.name !== 'string' || !node.name.startsWith(`${prefix}_`)) return null
  const field = node.name.slice(2)
  return (REQUEST_FIELDS as readonly string[]).includes(field) ? (field as Field) : null
}

const pinOf = (node: MatcherNode | undefined): Pin | null => {
  const field = fieldOf(node, 'r')
  if (field !== null) return { from: 'request', field }
  if (node?.type === 'Literal' && typeof node.value === 'string') return { from: 'literal', value: node.value }
  return null
}

/** Every identifier of the tree: a request attribute the API does not send makes the matcher one the analysis leaves alone. */
function identifiers(node: MatcherNode, into: string[] = []): string[] {
  if (node.type === 'Identifier' && typeof node.name === 'string') into.push(node.name)
  if (node.type === 'MemberExpression') into.push('<member>')
  for (const child of [node.left, node.right, node.argument, node.callee, node.object, ...(node.arguments ?? []), ...(node.elements ?? [])]) {
    if (child !== undefined) identifiers(child, into)
  }
  return into
}

function alternative(atoms: MatcherNode[]): Alternative | null {
  let subject: Alternative['subject'] | null = null
  const pins: Alternative['pins'] = {}
  for (const atom of atoms) {
    if (atom.type === 'CallExpression' && atom.callee?.type === 'Identifier' && atom.callee.name === 'g') {
      const [member, role, domain] = atom.arguments ?? []
      if (fieldOf(member, 'r') === 'sub' && fieldOf(role, 'p') === 'sub') {
        const pin = domain === undefined ? null : pinOf(domain)
        // Of two ties, either narrows: the exact one most.
        if (subject?.kind !== 'exact') subject = { kind: 'role', domain: pin ?? 'any' }
      }
      continue
    }
    if (atom.type === 'BinaryExpression' && atom.operator === '==') {
      for (const [a, b] of [
        [atom.left, atom.right],
        [atom.right, atom.left],
      ] as const) {
        const field = fieldOf(a, 'p')
        const pin = pinOf(b)
        if (field === null || pin === null) continue
        if (field === 'sub') {
          if (pin.from === 'request' && pin.field === 'sub') subject = { kind: 'exact' }
        } else if (pins[field] === undefined) {
          pins[field] = pin
        }
      }
    }
  }
  return subject === null ? null : { subject, pins }
}

/**
 * The model's matcher read once: the tree Casbin itself evaluates, and what
 * it says about which rows a question can match. Both the candidate index
 * (its alternatives) and the compiled matcher (its tree) read this, so they
 * cannot read the matcher by different rules; a load reads it once.
 */
export interface MatcherReading {
  /**
   * The matcher as Casbin evaluates it: its expression parser over the text
   * after Casbin's bracket rewrite, with Casbin's `in` operator. Null when
   * the matcher uses eval() (Casbin rewrites it per row) or does not parse.
   */
  tree: MatcherNode | null
  /**
   * Its alternatives when every one of them ties the policy's subject to
   * the requester; null when some alternative does not (no row could be
   * ruled out for it), when it reads a request attribute beyond sub, dom,
   * obj, act, when the fields are not the API's, or when there is no tree.
   */
  alternatives: Alternative[] | null
}

/** The matcher's tree as Casbin evaluates it, or null (see MatcherReading.tree). */
function treeOf(text: string | undefined): MatcherNode | null {
  if (text === undefined || Util.hasEval(text)) return null
  // Casbin adds `in` before it compiles a matcher (getExpression): added here too, so the tree does not depend on whether Casbin has compiled one yet.
  expressionEval.addBinaryOp('in', 1, Util.customIn)
  try {
    // The package is CommonJS: its named exports reach ESM only through the default one.
    return expressionEval.parse(Util.bracketCompatible(text)) as unknown as MatcherNode
  } catch {
    return null
  }
}

function alternativesOf(model: Model, tree: MatcherNode | null): Alternative[] | null {
  if (tree === null) return null
  // Rows are keyed by place: the fields must be the ones the API sends, in its order.
  const tokens = (sec: string) => model.model.get(sec)?.get(sec)?.tokens.join() ?? ''
  if (tokens('r') !== 'r_sub,r_dom,r_obj,r_act' || tokens('p') !== 'p_sub,p_dom,p_obj,p_act,p_eft') return null
  const names = identifiers(tree)
  if (names.includes('<member>') || names.some((n) => n.startsWith('r_') && fieldOf({ type: 'Identifier', name: n }, 'r') === null)) return null
  const form = disjunctiveForm(tree)
  if (form === null) return null
  const alternatives: Alternative[] = []
  for (const atoms of form) {
    const found = alternative(atoms)
    if (found === null) return null
    alternatives.push(found)
  }
  return alternatives
}

/** Reads the model's matcher (see MatcherReading). */
export function readMatcher(model: Model): MatcherReading {
  const tree = treeOf(model.model.get('m')?.get('m')?.value)
  return { tree, alternatives: alternativesOf(model, tree) }
}
