import { readFileSync } from 'node:fs'
import { newEnforcer, type Enforcer } from 'casbin'
import { RulesAdapter, StorageAdapter, type PolicyRules } from '../engine/adapter.js'
import { parsePolicyCsv, readCsvLine } from '../domain/policyCsv.js'
import { GLOBAL_DOMAIN } from '../domain/principals.js'
import { byCodeUnits } from '../domain/textOrder.js'
import { isReferenceModel } from '../engine/engine.js'
import { ModelError, parseModel, readModel } from '../engine/model.js'
import { listCatalog } from '../storage/catalog.js'
import type { Queryable } from '../storage/db.js'

export type { PolicyRules }

export interface ModelReport {
  path: string
  pRules: number
  gRules: number
  probes: number
  reference: boolean
}

/**
 * Where a check's policy comes from: the store (casbin_rule plus the per-user
 * overrides, exactly as the service loads them), or rules read from a file,
 * which needs no database at all.
 */
export type PolicySource = { kind: 'stored'; db: Queryable } | { kind: 'rules'; label: string; rules: PolicyRules }

const describeSource = (source: PolicySource) => (source.kind === 'stored' ? 'the stored policy' : source.label)

/** A decisions file or a policy file that cannot be read; named with the file and line. */
export class InputFileError extends ModelError {}

/** At most this many policy rules are replayed as requests: each request walks every p rule. */
const MAX_PROBES = 25

/**
 * Requests built from policy rules: each p rule asked back by a user holding
 * its subject (or by the subject itself), in the rule's domain. Casbin
 * compiles the matcher and the effect only when it evaluates a request, and
 * short-circuits on the first comparisons, so a request that matches a real
 * rule is what makes an unknown function or a bad effect show up.
 */
function probeRequests(p: string[][], g: string[][]): string[][] {
  const holder = new Map<string, string[]>()
  for (const rule of g) if (rule[1] !== undefined && !holder.has(rule[1])) holder.set(rule[1], rule)
  const step = Math.max(1, Math.ceil(p.length / MAX_PROBES))
  const requests: string[][] = [['probe-subject', GLOBAL_DOMAIN, 'probe-object', 'probe-action']]
  for (let i = 0; i < p.length; i += step) {
    const [sub = '', dom = '', obj = '', act = ''] = p[i] ?? []
    const assignment = holder.get(sub)
    requests.push(assignment === undefined ? [sub, dom, obj, act] : [assignment[0] ?? sub, dom === GLOBAL_DOMAIN ? (assignment[2] ?? dom) : dom, obj, act])
  }
  return requests
}

async function replay(enforcer: Enforcer, requests: string[][], what: string): Promise<void> {
  for (const request of requests) {
    try {
      await enforcer.enforce(...request)
    } catch (error) {
      throw new ModelError(`the model cannot evaluate ${what} (request ${JSON.stringify(request)}): ${(error as Error).message}`)
    }
  }
}

/**
 * With no rules Casbin evaluates the matcher once against empty policy values
 * and does not check the result's type, so an empty policy proves little: the
 * model is also run on one synthetic grant of its own.
 */
async function replaySynthetic(text: string): Promise<void> {
  let enforcer: Enforcer
  try {
    enforcer = await newEnforcer(parseModel(text))
    await enforcer.addGroupingPolicy('probe-user', 'probe-role', GLOBAL_DOMAIN)
    await enforcer.addPolicy('probe-role', GLOBAL_DOMAIN, 'probe-object', 'probe-action', 'allow')
  } catch (error) {
    if (error instanceof ModelError) throw error
    throw new ModelError(`the model cannot hold a role grant: ${(error as Error).message}`)
  }
  await replay(enforcer, [['probe-user', GLOBAL_DOMAIN, 'probe-object', 'probe-action']], 'a role grant')
}

export interface CheckedModel {
  report: ModelReport
  enforcer: Enforcer
  /** The policy as loaded, to run another model on the very same rules. */
  rules: PolicyRules
}

function loadedRules(enforcer: Enforcer): PolicyRules {
  const loaded = enforcer.getModel().model
  return { p: loaded.get('p')?.get('p')?.policy ?? [], g: loaded.get('g')?.get('g')?.policy ?? [] }
}

/**
 * Parses the model, loads the policy through it (the stored one exactly as
 * the service does, or the given rules) and replays sample requests. Throws
 * ModelError when the model is invalid or the policy does not load or
 * evaluate.
 */
export async function checkModel(path: string, source: PolicySource): Promise<CheckedModel> {
  const { text, model } = readModel(path)
  await replaySynthetic(text)
  let enforcer: Enforcer
  try {
    enforcer = await newEnforcer(model, source.kind === 'stored' ? new StorageAdapter(source.db) : new RulesAdapter(source.rules))
  } catch (error) {
    throw new ModelError(`${describeSource(source)} does not load through the model: ${(error as Error).message}`)
  }
  const rules = loadedRules(enforcer)
  const requests = probeRequests(rules.p, rules.g)
  await replay(enforcer, requests, describeSource(source))
  return {
    report: { path, pRules: rules.p.length, gRules: rules.g.length, probes: requests.length + 1, reference: isReferenceModel(model) },
    enforcer,
    rules,
  }
}

/** A second model (the one being replaced) on the same rules, checked the same way; its problems name it. */
export async function loadComparisonModel(path: string, source: PolicySource, rules: PolicyRules): Promise<Enforcer> {
  const same: PolicySource = { kind: 'rules', label: describeSource(source), rules }
  try {
    return (await checkModel(path, same)).enforcer
  } catch (error) {
    if (error instanceof ModelError && !error.message.includes(path)) throw new ModelError(`--against ${path}: ${error.message}`)
    throw error
  }
}

// ---------------------------------------------------------------------------
// Decisions files and policy files

export type Request = [sub: string, dom: string, obj: string, act: string]

export interface Decision {
  line: number
  request: Request
  allow: boolean
}

export interface DecisionsFile {
  path: string
  decisions: Decision[]
  /** The `p, …` and `g, …` lines of the file; null when it has none (the decisions then run on the stored policy). */
  rules: PolicyRules | null
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new InputFileError(`cannot read the ${what} at ${path}: ${(error as Error).message}`)
  }
}

/** A decision's comma-separated values, trimmed; every one must be there (Casbin would match an empty field against empty request values). */
function fields(text: string, count: number, where: string, shape: string): string[] {
  const values = text.split(',').map((v) => v.trim())
  if (values.length !== count || values.some((v) => v === '')) throw new InputFileError(`${where}: expected ${shape}, not "${text.trim()}"`)
  return values
}

/**
 * One policy line, read as Casbin's file adapter and `policy import` read it
 * (../domain/policyCsv.ts: quotes, commas inside quotes, `#` inside a value),
 * in the shapes the service stores: any other shape would check a policy the
 * service can never hold.
 */
function policyLine(raw: string, where: string, rules: PolicyRules): void {
  const read = readCsvLine(raw)
  if (read.kind === 'problem') throw new InputFileError(`${where}: ${read.reason}`)
  if (read.kind === 'rule') rules[read.rule.ptype].push(read.rule.values)
}

const POLICY_LINE = /^[pg]\s*,/

/** The lines that are neither blank nor comments (`#` first), numbered from 1, split as Casbin splits a policy file. */
function contentLines(path: string, text: string, onLine: (raw: string, where: string, line: number) => void): void {
  text.split('\n').forEach((raw, index) => {
    const trimmed = raw.trim()
    if (trimmed !== '' && !trimmed.startsWith('#')) onLine(raw, `${path}:${index + 1}`, index + 1)
  })
}

/**
 * A decisions file: `user-or-role, domain, obj, act -> allow|deny` lines,
 * `#` comments, blank lines, and optionally the policy they are decided on
 * as Casbin CSV lines (`p, …` and `g, …`).
 */
export function readDecisions(path: string): DecisionsFile {
  const decisions: Decision[] = []
  const rules: PolicyRules = { p: [], g: [] }
  contentLines(path, readText(path, 'decisions file'), (raw, where, line) => {
    // A decision may end in a comment; a policy line is read whole, as a policy file's is.
    const body = raw.replace(/#.*$/, '').trim()
    const arrow = body.split('->')
    if (arrow.length === 1 && POLICY_LINE.test(body)) return policyLine(raw, where, rules)
    const shape = '<user or sub-role>, <domain>, <obj>, <act> -> allow|deny'
    if (arrow.length !== 2) throw new InputFileError(`${where}: expected ${shape} or a policy line (p, … or g, …), not "${body}"`)
    const expected = (arrow[1] as string).trim()
    if (expected !== 'allow' && expected !== 'deny') throw new InputFileError(`${where}: a decision ends in -> allow or -> deny, not "-> ${expected}"`)
    decisions.push({ line, request: fields(arrow[0] as string, 4, where, shape) as Request, allow: expected === 'allow' })
  })
  if (decisions.length === 0) throw new InputFileError(`${path} holds no decision (lines such as "clerk, m-1, orders, refund -> allow")`)
  return { path, decisions, rules: rules.p.length + rules.g.length > 0 ? rules : null }
}

/**
 * A policy file as `policy import` reads it (parsePolicyCsv): its header
 * checked, each `# expires_at` tied to the override after it, and an override
 * whose instant has passed left out, since it decides nothing. A line the
 * import would refuse to read refuses the check.
 */
export function readPolicyFile(path: string, now = Date.now()): PolicyRules {
  const parsed = parsePolicyCsv(readText(path, 'policy file'))
  const problem = parsed.problems[0]
  if (problem !== undefined) throw new InputFileError(`${path}:${problem.line}: ${problem.reason}`)
  const rules: PolicyRules = { p: [], g: [] }
  for (const line of parsed.lines) if ((line.expiresAt ?? Number.POSITIVE_INFINITY) > now) rules[line.ptype].push(line.values)
  return rules
}

export interface FailedDecision extends Decision {
  /** What the model decided instead. */
  actual: boolean
}

async function decide(enforcer: Enforcer, request: Request, what: string): Promise<boolean> {
  try {
    return await enforcer.enforce(...request)
  } catch (error) {
    throw new ModelError(`the model cannot evaluate ${what} (request ${JSON.stringify(request)}): ${(error as Error).message}`)
  }
}

/**
 * Asks Casbin alone (enforce() on the model and the policy): the root bypass,
 * the catalog and the tenant rule sit outside the model, and the model is
 * what a platform engineer edits and what these decisions pin down.
 */
export async function failedDecisions(enforcer: Enforcer, file: DecisionsFile): Promise<FailedDecision[]> {
  const failed: FailedDecision[] = []
  for (const decision of file.decisions) {
    const actual = await decide(enforcer, decision.request, `${file.path}:${decision.line}`)
    if (actual !== decision.allow) failed.push({ ...decision, actual })
  }
  return failed
}

/** One failing decision, as `model check` prints it and a refused start names it. */
export function failureLine(path: string, f: FailedDecision): string {
  return `${path}:${f.line}: ${f.request.join(', ')} -> ${f.allow ? 'allow' : 'deny'}, but the model says ${f.actual ? 'allow' : 'deny'}`
}

/** What a decisions file is decided on: its own p and g lines when it has them, else `otherwise` (the stored policy, a policy file). */
export function decisionsPolicy(file: DecisionsFile, otherwise: PolicySource): PolicySource {
  return file.rules === null ? otherwise : { kind: 'rules', label: `the policy in ${file.path}`, rules: file.rules }
}

export interface DecisionsVerdict {
  checked: CheckedModel
  failed: FailedDecision[]
}

/**
 * The model checked on `source` (see checkModel) and every decision of
 * `file` asked of it: what `model check --decisions` reports and what gates
 * the service's start.
 */
export async function decisionsVerdict(modelPath: string, file: DecisionsFile, source: PolicySource): Promise<DecisionsVerdict> {
  const checked = await checkModel(modelPath, source)
  return { checked, failed: await failedDecisions(checked.enforcer, file) }
}

// ---------------------------------------------------------------------------
// Comparing two models

export interface ComparisonSpace {
  subjects: string[]
  domains: string[]
  pairs: Array<[obj: string, act: string]>
}

export interface Difference {
  request: Request
  before: boolean
  after: boolean
}

const sorted = (values: Iterable<string>) => [...new Set(values)].sort()

/**
 * Every subject the policy names (p subjects, g members and roles) in every
 * domain it names (and `global`), for every pair the catalog or a rule names.
 * A model can only ever be asked about these, so these are the decisions a
 * model change can move.
 */
export async function comparisonSpace(rules: PolicyRules, db?: Queryable): Promise<ComparisonSpace> {
  const pairs = new Map<string, [string, string]>()
  const addPair = (obj: string, act: string) => pairs.set(`${obj}\u0000${act}`, [obj, act])
  if (db !== undefined) for (const entry of await listCatalog(db)) addPair(entry.obj, entry.act)
  for (const [, , obj = '', act = ''] of rules.p) addPair(obj, act)
  return {
    subjects: sorted([...rules.p.map((r) => r[0] ?? ''), ...rules.g.flatMap((r) => [r[0] ?? '', r[1] ?? ''])].filter((s) => s !== '')),
    domains: sorted([GLOBAL_DOMAIN, ...rules.p.map((r) => r[1] ?? ''), ...rules.g.map((r) => r[2] ?? '')].filter((d) => d !== '')),
    pairs: [...pairs.values()].sort(([o1, a1], [o2, a2]) => byCodeUnits(o1, o2) || byCodeUnits(a1, a2)),
  }
}

export async function compareModels(before: Enforcer, after: Enforcer, space: ComparisonSpace): Promise<Difference[]> {
  const differences: Difference[] = []
  for (const sub of space.subjects) {
    for (const dom of space.domains) {
      for (const [obj, act] of space.pairs) {
        const request: Request = [sub, dom, obj, act]
        const was = await decide(before, request, 'the compared model')
        const is = await decide(after, request, 'the model')
        if (was !== is) differences.push({ request, before: was, after: is })
      }
    }
  }
  return differences
}
