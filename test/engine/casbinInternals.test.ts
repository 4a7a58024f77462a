import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { DefaultEffector, Effect, FunctionMap, Util, newEnforcer, newModelFromString } from 'casbin'
import t from 'tap'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite("Casbin's internals in memory; no database")

/**
 * The engine reaches past Casbin's public API in a few places: it redefines
 * a p assertion's `policy` (lazyPolicyList.ts), pushes to and edits the rule
 * lists in place (modelRows.ts, adapter.ts, overlay.ts), reads assertions'
 * `value` and `tokens` (model.ts, matcherAnalysis.ts, compiledModel.ts), calls
 * a g assertion's role manager synchronously (engine.ts), copies its depth
 * (decisionIndex.ts), and evaluates matchers with Casbin's own functions and
 * effector (compiledModel.ts). package.json pins Casbin to one version; this
 * file fails when a version changes any of those shapes.
 */

const modelText = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')

t.test('package.json pins the installed Casbin exactly', async (t) => {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> }
  const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
    packages: Record<string, { version?: string; dependencies?: Record<string, string> }>
  }
  const installed = (createRequire(import.meta.url)('casbin/package.json') as { version: string }).version
  t.match(manifest.dependencies.casbin, /^\d+\.\d+\.\d+$/, 'an exact version, no range')
  t.equal(manifest.dependencies.casbin, installed, 'the version installed')
  t.equal(lock.packages['']?.dependencies?.casbin, manifest.dependencies.casbin, "the lock's root entry says the same")
  t.equal(lock.packages['node_modules/casbin']?.version, installed, 'and locks that version')
})

t.test("a model's assertions: Maps of sections, each with its value, tokens and rule list", async (t) => {
  const model = newModelFromString(modelText)
  t.ok(model.model instanceof Map, 'model.model is a Map of sections')
  for (const sec of ['r', 'p', 'g', 'e', 'm']) {
    const assertion = model.model.get(sec)?.get(sec)
    t.ok(assertion !== undefined, `section ${sec} holds an assertion keyed ${sec}`)
    t.type(assertion?.value, 'string', `${sec}.value is the text`)
  }
  t.same(model.model.get('r')?.get('r')?.tokens, ['r_sub', 'r_dom', 'r_obj', 'r_act'], 'r.tokens name the request fields')
  t.same(model.model.get('p')?.get('p')?.tokens, ['p_sub', 'p_dom', 'p_obj', 'p_act', 'p_eft'], 'p.tokens name the rule fields')
  const p = model.model.get('p')?.get('p')
  t.ok(Array.isArray(p?.policy), 'p.policy is an array')
  const descriptor = p === undefined ? undefined : Object.getOwnPropertyDescriptor(p, 'policy')
  t.ok(descriptor?.configurable === true && 'value' in descriptor, 'p.policy is an own data property that can be redefined (LazyPolicyList)')
})

t.test('the enforcer reads policy through the assertion, so a redefined property and in-place edits decide', async (t) => {
  const enforcer = await newEnforcer(newModelFromString(modelText))
  enforcer.enableAutoSave(false)
  const p = enforcer.getModel().model.get('p')?.get('p')
  const g = enforcer.getModel().model.get('g')?.get('g')
  if (p === undefined || g === undefined) throw new Error('no p or g')
  t.notOk(enforcer.enforceSync('alice', 'm-1', 'orders', 'read'), 'nothing held yet')
  let rows: string[][] = []
  Object.defineProperty(p, 'policy', { configurable: true, enumerable: true, get: () => rows, set: (next: string[][]) => (rows = next) })
  rows.push(['clerk', 'm-1', 'orders', 'read', 'allow'])
  g.policy.push(['alice', 'clerk', 'm-1'])
  await enforcer.buildIncrementalRoleLinks(0 /* PolicyOp.PolicyAdd */, 'g', [['alice', 'clerk', 'm-1']])
  t.ok(enforcer.enforceSync('alice', 'm-1', 'orders', 'read'), 'a row pushed to the redefined list decides')
  t.same(enforcer.enforceExSync('alice', 'm-1', 'orders', 'read'), [true, ['clerk', 'm-1', 'orders', 'read', 'allow']], 'enforceExSync names the row')
  rows = []
  t.notOk(enforcer.enforceSync('alice', 'm-1', 'orders', 'read'), 'the list replaced through the property decides')
})

t.test("a g assertion's role manager: synchronous links, followed 10 deep (decisionIndex.ts's MAX_HIERARCHY)", async (t) => {
  const enforcer = await newEnforcer(newModelFromString(modelText))
  enforcer.enableAutoSave(false)
  const chain = Array.from({ length: 12 }, (_, i) => `r${i}`)
  for (let i = 0; i + 1 < chain.length; i++) await enforcer.addGroupingPolicy(chain[i] as string, chain[i + 1] as string, 'm-1')
  // Read once the links are in, as the engine reads it (a write may give the assertion a new role manager).
  const rm = enforcer.getModel().model.get('g')?.get('g')?.rm as unknown as { syncedHasLink?: unknown; maxHierarchyLevel?: unknown } | undefined
  t.type(rm?.syncedHasLink, 'function', 'rm.syncedHasLink')
  t.equal(rm?.maxHierarchyLevel, 10, 'the depth decisionIndex.ts copies')
  const hasLink = (rm as { syncedHasLink: (a: string, b: string, d: string) => boolean }).syncedHasLink.bind(rm)
  t.ok(hasLink('r0', 'r10', 'm-1'), 'ten links are followed')
  t.notOk(hasLink('r0', 'r11', 'm-1'), 'the eleventh is not')
})

t.test("what the compiled matcher takes from Casbin: its functions, its effector, Util's matcher helpers", async (t) => {
  t.type(Util.hasEval, 'function')
  t.type(Util.bracketCompatible, 'function')
  const functions = FunctionMap.loadFunctionMap().getFunctions() as Map<string, unknown>
  t.ok(functions instanceof Map && typeof functions.get('keyMatch') === 'function', 'FunctionMap.loadFunctionMap().getFunctions() is a Map of functions')
  t.same([Effect.Allow, Effect.Indeterminate, Effect.Deny].map((e) => typeof e), ['number', 'number', 'number'], 'Effect is a numeric enum')
  const model = newModelFromString(modelText)
  const stream = new DefaultEffector().newStream(model.model.get('e')?.get('e')?.value ?? '')
  const pushed = stream.pushEffect(Effect.Allow)
  t.ok(Array.isArray(pushed) && pushed.length === 3, 'pushEffect answers [result, this row decided, done]')
  t.equal(stream.current(), true, 'an effector stream says allow for one allow under the shipped effect')
})
