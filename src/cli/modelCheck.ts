import { newEnforcer, type Enforcer } from 'casbin'
import { StorageAdapter } from '../engine/adapter.js'
import { isReferenceModel } from '../engine/engine.js'
import { ModelError, parseModel, readModel } from '../engine/model.js'
import type { Queryable } from '../storage/db.js'

export interface ModelReport {
  path: string
  pRules: number
  gRules: number
  probes: number
  reference: boolean
}

/** At most this many stored rules are replayed as requests: each request walks every p rule. */
const MAX_PROBES = 25

/**
 * Requests built from stored rules: each p rule asked back by a user holding
 * its subject (or by the subject itself), in the rule's domain. Casbin
 * compiles the matcher and the effect only when it evaluates a request, and
 * short-circuits on the first comparisons, so a request that matches a real
 * rule is what makes an unknown function or a bad effect show up.
 */
function probeRequests(p: string[][], g: string[][]): string[][] {
  const holder = new Map<string, string[]>()
  for (const rule of g) if (rule[1] !== undefined && !holder.has(rule[1])) holder.set(rule[1], rule)
  const step = Math.max(1, Math.ceil(p.length / MAX_PROBES))
  const requests: string[][] = [['probe-subject', 'global', 'probe-object', 'probe-action']]
  for (let i = 0; i < p.length; i += step) {
    const [sub = '', dom = '', obj = '', act = ''] = p[i] ?? []
    const assignment = holder.get(sub)
    requests.push(assignment === undefined ? [sub, dom, obj, act] : [assignment[0] ?? sub, dom === 'global' ? (assignment[2] ?? dom) : dom, obj, act])
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
 * With no stored rules Casbin evaluates the matcher once against empty policy
 * values and does not check the result's type, so an empty store proves
 * little: the model is also run on one synthetic grant of its own.
 */
async function replaySynthetic(text: string): Promise<void> {
  let enforcer: Enforcer
  try {
    enforcer = await newEnforcer(parseModel(text))
    await enforcer.addGroupingPolicy('probe-user', 'probe-role', 'global')
    await enforcer.addPolicy('probe-role', 'global', 'probe-object', 'probe-action', 'allow')
  } catch (error) {
    if (error instanceof ModelError) throw error
    throw new ModelError(`the model cannot hold a role grant: ${(error as Error).message}`)
  }
  await replay(enforcer, [['probe-user', 'global', 'probe-object', 'probe-action']], 'a role grant')
}

/**
 * Parses the model, loads the stored policy through it exactly as the
 * service does (casbin_rule plus the per-user overrides) and replays sample
 * requests. Throws ModelError when the model is invalid or the policy does
 * not load or evaluate.
 */
export async function checkModel(db: Queryable, path: string): Promise<ModelReport> {
  const { text, model } = readModel(path)
  await replaySynthetic(text)
  let enforcer: Enforcer
  try {
    enforcer = await newEnforcer(model, new StorageAdapter(db))
  } catch (error) {
    throw new ModelError(`the stored policy does not load through the model: ${(error as Error).message}`)
  }
  const loaded = enforcer.getModel().model
  const p = loaded.get('p')?.get('p')?.policy ?? []
  const g = loaded.get('g')?.get('g')?.policy ?? []
  const requests = probeRequests(p, g)
  await replay(enforcer, requests, 'the stored policy')
  return { path, pRules: p.length, gRules: g.length, probes: requests.length + 1, reference: isReferenceModel(model) }
}
