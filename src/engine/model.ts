import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { newEnforcer, newModelFromString, type Adapter, type Enforcer, type Model } from 'casbin'

export class ModelError extends Error {}

/**
 * The model the decision index implements (the shipped model.conf). A model
 * whose sections differ after Casbin's parsing is still served, through
 * enforce() with a cache.
 */
export const REFERENCE_MODEL = `
[request_definition]
r = sub, dom, obj, act

[policy_definition]
p = sub, dom, obj, act, eft

[role_definition]
g = _, _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = r.obj == p.obj && r.act == p.act && ((g(r.sub, p.sub, r.dom) && (p.dom == r.dom || p.dom == "global")) || (g(r.sub, p.sub, "global") && p.dom == "global"))
`

/** The sections the service relies on: requests and policies of (sub, dom, obj, act[, eft]) and a `g` with domains. */
export function parseModel(text: string): Model {
  let model: Model
  try {
    model = newModelFromString(text)
  } catch (error) {
    throw new ModelError(`the Casbin model does not parse: ${(error as Error).message}`)
  }
  const tokens = (sec: string, key: string) => model.model.get(sec)?.get(key)?.tokens ?? []
  const request = tokens('r', 'r')
  const policy = tokens('p', 'p')
  if (request.length !== 4) throw new ModelError('the model needs r = sub, dom, obj, act')
  if (policy.length !== 5 || !policy[4]?.endsWith('_eft')) throw new ModelError('the model needs p = sub, dom, obj, act, eft')
  if (!model.model.get('g')?.get('g')) throw new ModelError('the model needs a role definition g = _, _, _')
  if (!model.model.get('m')?.get('m')) throw new ModelError('the model needs a matcher m')
  return model
}

export function readModel(path: string): { text: string; model: Model } {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new ModelError(`cannot read the Casbin model at ${path}: ${(error as Error).message}`)
  }
  return { text, model: parseModel(text) }
}

/** Casbin's enforcer over the adapter's rows. Auto-save off: a command writes its rows in its own transaction. */
export async function loadEnforcer(modelText: string, adapter: Adapter): Promise<Enforcer> {
  const enforcer = await newEnforcer(parseModel(modelText), adapter)
  enforcer.enableAutoSave(false)
  return enforcer
}

/** A model's id in decision events and the shadow's summary: the first 12 hex digits of its text's SHA-256. */
export const modelId = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 12)
