import { existsSync } from 'node:fs'
import { decisionsPolicy, decisionsVerdict, failureLine, readDecisions } from './modelCheck/modelCheck.js'
import type { Logger } from './compose.js'
import type { Config, ShadowModelConfig } from './config.js'
import { describeDecisionCost, measureDecisionCost } from './engine/decisionCost.js'
import type { PermissionEngine } from './engine/engine.js'
import { ModelError, parseModel } from './engine/model.js'
import type { Queryable } from './storage/db.js'

/** sysexits.h's EX_CONFIG: the configuration (here the model) is wrong, a restart will not help. */
export const EXIT_MODEL_DECISIONS = 78

/** The model does not give the decisions it must: the service does not start. `lines` names each failure. */
export class ModelDecisionsRefused extends Error {
  override name = 'ModelDecisionsRefused'
  constructor(
    headline: string,
    readonly lines: readonly string[],
  ) {
    super([headline, ...lines.map((line) => `  ${line}`)].join('\n'))
  }
}

/** What running a decisions file against a model gave: not run (no file beside the model, none named), or how many were checked and any refusal. */
type DecisionsOutcome = { ran: false } | { ran: true; checked: number; refusal: ModelDecisionsRefused | null }

/**
 * Runs the decisions file against the model at `modelPath`, as `model check
 * --decisions` does: on the file's own policy when it has one, else on the
 * stored policy. A failing decision, a file that cannot be read or a model
 * that cannot evaluate it is a refusal.
 */
async function runModelDecisions(modelPath: string, decisions: { path: string; explicit: boolean }, db: Queryable): Promise<DecisionsOutcome> {
  const { path } = decisions
  if (!decisions.explicit && !existsSync(path)) return { ran: false }
  try {
    const file = readDecisions(path)
    const { failed } = await decisionsVerdict(modelPath, file, decisionsPolicy(file, { kind: 'stored', db }))
    if (failed.length === 0) return { ran: true, checked: file.decisions.length, refusal: null }
    const headline = `${failed.length} of ${file.decisions.length} decisions in ${path} do not hold for the model ${modelPath}:`
    return { ran: true, checked: file.decisions.length, refusal: new ModelDecisionsRefused(headline, failed.map((f) => failureLine(file.path, f))) }
  } catch (error) {
    if (!(error instanceof ModelError)) throw error
    return { ran: true, checked: 0, refusal: new ModelDecisionsRefused(`the decisions in ${path} cannot be checked against the model ${modelPath}:`, [error.message]) }
  }
}

/**
 * Runs the decisions file against the model (runModelDecisions). Throws
 * ModelDecisionsRefused when it refuses the model, unless
 * ALLOW_FAILING_MODEL_DECISIONS=true: then each failure is logged as an
 * error and the start goes on. With no decisions file beside the model (and
 * none named) there is nothing to run.
 */
export async function gateModelDecisions(config: Config, db: Queryable, log?: Logger): Promise<void> {
  const { path, allowFailing } = config.modelDecisions
  const where = { model: config.modelPath, decisions: path }
  const outcome = await runModelDecisions(config.modelPath, config.modelDecisions, db)
  if (!outcome.ran) {
    log?.warn(where, `no decisions file beside the model (${path}): the model's decisions are not checked before the start`)
    return
  }
  const { refusal } = outcome
  if (refusal === null) {
    log?.info({ ...where, decisions_checked: outcome.checked }, `the model gives all ${outcome.checked} decisions in ${path}`)
    return
  }
  if (!allowFailing) throw refusal
  log?.error(
    { ...where, failures: refusal.lines },
    `ALLOW_FAILING_MODEL_DECISIONS=true: starting although ${refusal.message.split('\n')[0] ?? ''} ${refusal.lines.join('; ')}`,
  )
}

/** The shadow model admitted (its text), or why it was refused. */
export type ShadowAdmission = { admitted: true; text: string } | { admitted: false; refusal: string }

/**
 * SHADOW_MODEL_PATH at start-up: the model must read, be of the family and
 * give every decision of the live model's decisions file, or it is refused
 * (logged as an error; the service starts without a shadow).
 * ALLOW_FAILING_MODEL_DECISIONS does not apply: a shadow is a candidate for
 * promotion, and one that fails the decisions could not be promoted.
 */
export async function admitShadowModel(shadow: ShadowModelConfig, decisions: Config['modelDecisions'], db: Queryable, log?: Logger): Promise<ShadowAdmission> {
  const where = { shadow_model: shadow.path, decisions: decisions.path }
  const refuse = (refusal: string): ShadowAdmission => {
    log?.error({ ...where, refusal }, `the shadow model is refused, the service runs without it: ${refusal}`)
    return { admitted: false, refusal }
  }
  if (!('text' in shadow)) return refuse(shadow.unreadable)
  try {
    parseModel(shadow.text)
  } catch (error) {
    if (!(error instanceof ModelError)) throw error
    return refuse(`${shadow.path}: ${error.message}`)
  }
  const outcome = await runModelDecisions(shadow.path, decisions, db)
  if (outcome.ran && outcome.refusal !== null) return refuse(outcome.refusal.message.replace(/\n\s*/g, ' '))
  if (!outcome.ran) log?.warn(where, `no decisions file beside the model (${decisions.path}): the shadow model's decisions are not checked`)
  else log?.info({ ...where, decisions_checked: outcome.checked }, `the shadow model gives all ${outcome.checked} decisions in ${decisions.path}`)
  return { admitted: true, text: shadow.text }
}

/** Logs which decision path the loaded model gets and what an uncached decision costs at the loaded policy's size. */
export function logDecisionPath(engine: PermissionEngine, modelPath: string, log: Logger): void {
  const cost = measureDecisionCost(engine)
  const fields = { model: modelPath, decision_path: cost.mode, decisions_per_second: cost.perSecond, p_rules: cost.pRules, g_rules: cost.gRules }
  if (!cost.scansEveryRow) log.info(fields, describeDecisionCost(cost))
  else log.warn(fields, `${describeDecisionCost(cost)} (correct, slower)`)
}
