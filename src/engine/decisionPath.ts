import { newEnforcer, newModelFromString, type Adapter, type Enforcer, type Model } from 'casbin'
import type { Account } from '../domain/principals.js'
import { CompiledModel, type RoleFunction } from './compiledModel.js'
import type { DecisionIndex, RuleChange } from './decisionIndex.js'
import type { ReasonCode } from './explain.js'
import { readMatcher } from './matcherAnalysis.js'
import { REFERENCE_MODEL, parseModel } from './model.js'
import type { OverrideExpiries } from './overrideExpiryQueue.js'
import { CompiledCandidatesPath, EnforcedCandidatesPath } from './paths/candidatesPath.js'
import { EnforcePath } from './paths/enforcePath.js'
import { IndexPath } from './paths/indexPath.js'

/**
 * The four ways a loaded policy is decided, one implementation each:
 * 'index' (the shipped model's decision index), 'candidates' (the rows a
 * question can match, Casbin's matcher and effect compiled over them),
 * 'candidates-enforce' (the same rows handed to Casbin's enforce, with a
 * cache), 'enforce-cache' (enforce() over every row, with a cache).
 */
export type DecisionPathName = 'index' | 'candidates' | 'candidates-enforce' | 'enforce-cache'

/** A user a change reaches, and the domain its decision is taken in. */
export interface Reached {
  account: Account
  domain: string
}

/** What a role's reach reads of the accounts in memory. */
export interface AccountLookup {
  peek(id: string): Account | undefined
  all(): Iterable<Account>
}

/**
 * One loaded policy and how it is decided. Every path owns its rows (Casbin's
 * enforcer and what it keeps beside it), its cache or none, its writes, and
 * what holders and previews need of it; the engine in front of it applies
 * only what every path shares (the catalog, the tenant rule, root roles).
 * A reload loads a new one of the same kind and swaps it in whole.
 */
export interface DecisionPath {
  readonly name: DecisionPathName
  /** How decisions are taken, in words (logs, `model check`). */
  readonly how: string
  /** Why the model gets this path, in words, when that needs saying ('' when not). */
  readonly why: string
  /** Whether an uncached decision's cost grows with the policy (a scan of every row): the start-up log warns about such a path. */
  readonly scansEveryRow: boolean
  /** Casbin's enforcer over the same rows (enforce() for tools and tests; its role manager). */
  readonly enforcer: Enforcer
  /** The rows as grants and links: who holds what (a holder's `via`, effective sets, access review). */
  readonly index: DecisionIndex
  /** When the loaded overrides that expire stop counting. */
  readonly expiries: OverrideExpiries
  /**
   * The model's answer and why, no tenant, root or catalog rule, from the
   * path's cache when it keeps one: a reason code (allowing below
   * REASON.user_deny), the deciding row kept for decidingRow().
   */
  decide(subjectId: string, domain: string, obj: string, act: string): ReasonCode
  /** The same, worked out, as a decision pays for it right after a write. */
  decideUncached(subjectId: string, domain: string, obj: string, act: string): ReasonCode
  /**
   * The p row that decided the last decide() or decideUncached() (null for
   * none): the index's own fold, or the row Casbin's enforceEx names. Read
   * it right after; it is put together only when read.
   */
  decidingRow(): readonly string[] | null
  /** The answer with the p rows of `changes` laid over the policy, which stays as it is. */
  allowsAfter(subjectId: string, domain: string, obj: string, act: string, changes: readonly RuleChange[]): boolean
  /** The ids a holders list must decide besides root accounts; null when every account must be decided. */
  possibleHolders(domain: string, obj: string, act: string): ReadonlySet<string> | null
  /** The users a change of `role`'s row in `domain` may reach, each with the domain it is decided in. */
  roleReach(accounts: AccountLookup, role: string, domain: string): Reached[]
  /** A committed row into memory (the caller knows nothing of whether it is held). */
  add(ptype: 'p' | 'g', values: readonly string[]): Promise<void>
  remove(ptype: 'p' | 'g', values: readonly string[]): Promise<void>
}

/** Loads one policy on a path chosen before: the engine's load and every reload. */
export interface PathLoader {
  readonly name: DecisionPathName
  load(adapter: Adapter, expiries: OverrideExpiries): Promise<DecisionPath>
}

const sections = ['r', 'p', 'g', 'e', 'm'] as const

/** Whether the model decides exactly as the reference model.conf (compared after Casbin's own parsing). */
export function isReferenceModel(model: Model): boolean {
  const reference = newModelFromString(REFERENCE_MODEL)
  const value = (m: Model, sec: string) => m.model.get(sec)?.get(sec)?.value.replace(/\s+/g, '')
  return sections.every((sec) => value(model, sec) === value(reference, sec))
}

/**
 * The model's answer when no row matches: asked of Casbin on one row no
 * request can match (its subject is tied to nothing and named by no link).
 */
async function noMatchAnswer(modelText: string): Promise<boolean> {
  const enforcer = await newEnforcer(parseModel(modelText))
  await enforcer.addPolicy('\u0000no-subject', '\u0000', '\u0000', '\u0000', 'allow')
  return enforcer.enforceSync('\u0001someone', '\u0001', '\u0001', '\u0001')
}

/**
 * The one place that chooses a model's decision path: read the model (its
 * matcher once), pick the path, and hand back what loads it.
 */
export async function choosePath(modelText: string): Promise<PathLoader> {
  const model = parseModel(modelText)
  if (isReferenceModel(model)) return IndexPath.loader(modelText)
  const matcher = readMatcher(model)
  const { alternatives } = matcher
  if (alternatives === null) return EnforcePath.loader(modelText)
  // Whether the matcher compiles does not depend on what the role functions answer: any will do to find out.
  const roleNames = new Map<string, RoleFunction>([...(model.model.get('g')?.keys() ?? [])].map((key) => [key, () => false]))
  if (CompiledModel.compile(model, matcher, roleNames) !== null) return CompiledCandidatesPath.loader(modelText, matcher, alternatives)
  return EnforcedCandidatesPath.loader(modelText, alternatives, await noMatchAnswer(modelText))
}
