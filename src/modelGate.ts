import { existsSync } from 'node:fs'
import { decisionsPolicy, decisionsVerdict, failureLine, readDecisions } from './modelCheck/modelCheck.js'
import type { Logger } from './compose.js'
import type { Config } from './config.js'
import { describeDecisionCost, measureDecisionCost } from './engine/decisionCost.js'
import type { PermissionEngine } from './engine/engine.js'
import { ModelError } from './engine/model.js'
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

/**
 * Runs the decisions file against the model, as `model check --decisions`
 * does: on the file's own policy when it has one, else on the stored policy.
 * Throws ModelDecisionsRefused when a decision fails, the file cannot be read
 * or the model cannot evaluate it, unless ALLOW_FAILING_MODEL_DECISIONS=true:
 * then each failure is logged as an error and the start goes on. With no
 * decisions file beside the model (and none named) there is nothing to run.
 */
export async function gateModelDecisions(config: Config, db: Queryable, log?: Logger): Promise<void> {
  const { path, explicit, allowFailing } = config.modelDecisions
  const where = { model: config.modelPath, decisions: path }
  if (!explicit && !existsSync(path)) {
    log?.warn(where, `no decisions file beside the model (${path}): the model's decisions are not checked before the start`)
    return
  }
  let refusal: ModelDecisionsRefused | null = null
  try {
    const file = readDecisions(path)
    const { failed } = await decisionsVerdict(config.modelPath, file, decisionsPolicy(file, { kind: 'stored', db }))
    if (failed.length === 0) {
      log?.info({ ...where, decisions_checked: file.decisions.length }, `the model gives all ${file.decisions.length} decisions in ${path}`)
      return
    }
    const headline = `${failed.length} of ${file.decisions.length} decisions in ${path} do not hold for the model ${config.modelPath}:`
    refusal = new ModelDecisionsRefused(headline, failed.map((f) => failureLine(file.path, f)))
  } catch (error) {
    if (!(error instanceof ModelError)) throw error
    refusal = new ModelDecisionsRefused(`the decisions in ${path} cannot be checked against the model ${config.modelPath}:`, [error.message])
  }
  if (!allowFailing) throw refusal
  log?.error(
    { ...where, failures: refusal.lines },
    `ALLOW_FAILING_MODEL_DECISIONS=true: starting although ${refusal.message.split('\n')[0] ?? ''} ${refusal.lines.join('; ')}`,
  )
}

/** Logs which decision path the loaded model gets and what an uncached decision costs at the loaded policy's size. */
export function logDecisionPath(engine: PermissionEngine, modelPath: string, log: Logger): void {
  const cost = measureDecisionCost(engine)
  const fields = { model: modelPath, decision_path: cost.mode, decisions_per_second: cost.perSecond, p_rules: cost.pRules, g_rules: cost.gRules }
  if (!cost.scansEveryRow) log.info(fields, describeDecisionCost(cost))
  else log.warn(fields, `${describeDecisionCost(cost)} (correct, slower)`)
}
