import { readFileSync } from 'node:fs'
import t from 'tap'
import { MEASURE_QUESTIONS, describeDecisionCost, measureDecisionCost } from '../../src/engine/decisionCost.js'
import { PermissionEngine } from '../../src/engine/engine.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the engine in memory')

const shipped = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
const swapped = shipped.replace('r.obj == p.obj && r.act == p.act', 'r.act == p.act && r.obj == p.obj')
/** One alternative without a subject tie: outside the family the candidate index serves. */
const untied = shipped.replace('(g(r.sub, p.sub, "global") && p.dom == "global")', '((g(r.sub, p.sub, "global") || r.sub == "nobody") && p.dom == "global")')

/** A policy of `roles` roles with ten grants each and a member per role. */
function policy(roles: number) {
  const p: string[][] = []
  const g: string[][] = []
  for (let r = 0; r < roles; r++) {
    for (let k = 0; k < 10; k++) p.push([`role${r}`, `m${r % 7}`, `obj${k}`, `act${r % 3}`, k === 9 ? 'deny' : 'allow'])
    g.push([`user-${r}`, `role${r}`, `m${r % 7}`])
  }
  return { p, g }
}

t.test('the measurement names the path a model gets and counts what it asked', async (t) => {
  const rules = policy(50)
  const index = measureDecisionCost(await PermissionEngine.fromRules(shipped, rules))
  t.equal(index.mode, 'index')
  t.equal(index.pRules, 500)
  t.equal(index.gRules, 50)
  t.ok(index.questions > 0 && index.questions <= MEASURE_QUESTIONS, `${index.questions} questions`)
  t.ok(index.perSecond > 0)
  t.match(describeDecisionCost(index), /^decisions will use the decision index: [\d,]+ uncached decisions a second, measured at 500 p rules and 50 g rules$/)

  const narrowed = measureDecisionCost(await PermissionEngine.fromRules(swapped, rules))
  t.equal(narrowed.mode, 'candidates')
  t.ok(narrowed.questions > 0 && narrowed.perSecond > 0)
  t.match(describeDecisionCost(narrowed), /^the model differs from the one the decision index implements, so decisions will use Casbin's matcher and effect over the rows a question can match/)

  t.not(untied, shipped)
  const scan = measureDecisionCost(await PermissionEngine.fromRules(untied, rules))
  t.equal(scan.mode, 'enforce-cache')
  t.ok(scan.questions > 0 && scan.perSecond > 0)
  t.match(describeDecisionCost(scan), /^the matcher does not tie the policy's subject to the requester in every alternative, so decisions will use enforce\(\) with a cache/)
})

t.test('the questions it asks are the uncached model decisions: the same answers as enforce()', async (t) => {
  const rules = policy(20)
  for (const text of [shipped, swapped, untied]) {
    const engine = await PermissionEngine.fromRules(text, rules)
    let compared = 0
    let mismatches = 0
    // Each subject once: a role names the subject of its ten p rows.
    for (const sub of new Set([...rules.g, ...rules.p].map(([sub]) => sub as string))) {
      for (const dom of ['global', 'm0', 'm1', 'm3']) {
        for (const [, , obj = '', act = ''] of rules.p.slice(0, 12)) {
          if (engine.uncachedModelAllows(sub, dom, obj, act) !== engine.enforce(sub, dom, obj, act)) mismatches++
          compared++
        }
      }
    }
    t.ok(compared > 1000, `${compared} compared`)
    t.equal(mismatches, 0)
  }
})
