/**
 * The shadow comparer called directly, as the decision pipeline calls it
 * after an answer: the shipped model live, an edited model as the shadow.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { Service } from '../../src/compose.js'
import type { DecisionQuestion } from '../../src/decisionLog/event.js'
import { IDS_PER_PAIR, ShadowModelComparer } from '../../src/decisionLog/shadow.js'
import type { Account } from '../../src/domain/principals.js'
import { emptyPolicyRecord } from '../../src/engine/adapter.js'
import { PermissionEngine } from '../../src/engine/engine.js'
import { REASON_NAMES, allows } from '../../src/engine/explain.js'
import { ShadowEngine } from '../../src/engine/shadowEngine.js'
import { buildTestApp, buildTestService, onboard, register, tempDir } from '../helper.js'
import { ManualClock } from '../support/manualClock.js'
import { roleCommand } from '../support/permissionCommands.js'
import { shippedModelText, writeImpliesReadModel } from '../support/shadowModels.js'

/** The question the pipeline hands over: the live engine's own decision and reason. */
function asked(service: Service, account: Account, domain: string, obj: string, act: string): DecisionQuestion {
  const code = service.engine.decision(account, domain, obj, act)
  return { account, domain, obj, act, allowed: allows(code), reason: { kind: REASON_NAMES[code] } }
}

async function world(t: Test) {
  const dir = tempDir(t, 'aps-shadow-')
  writeFileSync(join(dir, 'shadow.conf'), writeImpliesReadModel)
  const lines: Array<{ obj: Record<string, unknown>; msg: string }> = []
  const warn = (obj: object, msg?: string) => void lines.push({ obj: obj as Record<string, unknown>, msg: msg ?? '' })
  const clock = new ManualClock()
  const service = await buildTestService(t, { env: { SHADOW_MODEL_PATH: join(dir, 'shadow.conf') }, clock, log: { info: () => undefined, warn, error: () => undefined } })
  const ta = await buildTestApp(t, { service })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  t.equal((await roleCommand(ta, 'grant', 'clerk', { obj: 'products', act: 'write', domain: 'm1' })).statusCode, 200)
  t.equal((await roleCommand(ta, 'grant', 'clerk', { obj: 'orders', act: 'refund', domain: 'm1' })).statusCode, 200)
  const comparer = service.shadow
  if (comparer === null) throw new Error('the edited model was not admitted')
  return { service, clerk, comparer, lines, clock }
}

t.test('agreements are counted, a disagreement comes back with the deciding rule and is summarised', async (t) => {
  const { service, clerk, comparer } = await world(t)
  t.equal(comparer.compare(asked(service, clerk, 'm1', 'orders', 'refund'), 'd-1'), null, 'both allow')
  t.equal(comparer.compare(asked(service, clerk, 'm1', 'payouts', 'approve'), 'd-2'), null, 'both deny')
  t.equal(comparer.compare(asked(service, clerk, 'm2', 'products', 'read'), 'd-3'), null, 'the tenant rule settles it for both, before either model')
  t.same(
    comparer.compare(asked(service, clerk, 'm1', 'products', 'read'), 'd-4'),
    { allowed: true, reason: { kind: 'role', rule: ['clerk', 'm1', 'products', 'write', 'allow'] } },
    'the live model denies, the shadow allows through the write grant',
  )
  t.equal(comparer.compared, 4)
  t.same(comparer.disagreements(), [{ obj: 'products', act: 'read', count: 1, decision_ids: ['d-4'] }])

  for (let i = 5; i < 12; i++) comparer.compare(asked(service, clerk, 'm1', 'products', 'read'), `d-${i}`)
  t.same(comparer.disagreements(), [{ obj: 'products', act: 'read', count: 8, decision_ids: ['d-4', 'd-5', 'd-6', 'd-7', 'd-8'] }], `at most ${IDS_PER_PAIR} ids per pair`)

  const deactivated = { ...clerk, status: 'deactivated' as const }
  t.equal(comparer.compare(asked(service, deactivated, 'm1', 'products', 'read')), null, 'a deactivated account holds nothing in either model')
  t.match(comparer.compare({ ...asked(service, clerk, 'm1', 'orders', 'refund'), allowed: false }, 'd-x'), { allowed: true }, 'the shadow is compared with the answer that was given')
  t.same(comparer.disagreements()[1], { obj: 'orders', act: 'refund', count: 1, decision_ids: ['d-x'] }, 'each pair summarised apart')
})

t.test('one warn line per disagreement, at most ten a second; the next line says how many were not logged', async (t) => {
  const { service, clerk, comparer, lines, clock } = await world(t)
  for (let i = 0; i < 13; i++) comparer.compare(asked(service, clerk, 'm1', 'products', 'read'), `d-${i}`)
  t.equal(lines.length, 10)
  t.match(lines[0], {
    msg: /^the shadow model disagrees: products:read in m1 is denied, the shadow model would allow it \(role\)$/,
    obj: { decision_id: 'd-0', user_id: clerk.id, domain: 'm1', obj: 'products', act: 'read', allowed: false, shadow: { allowed: true, reason: { kind: 'role' } }, shadow_model_id: comparer.modelId },
  })
  t.notOk('disagreements_not_logged' in (lines[9]?.obj ?? {}))
  clock.advance(1000)
  comparer.compare(asked(service, clerk, 'm1', 'products', 'read'), 'd-13')
  t.equal(lines.length, 11)
  t.match(lines[10]?.obj, { decision_id: 'd-13', disagreements_not_logged: 3 })
  t.equal(comparer.disagreements()[0]?.count, 14, 'every disagreement counted, logged or not')
})

t.test('SHADOW_SAMPLE: only the sampled share is asked', async (t) => {
  const { service, clerk } = await world(t)
  const state = { rootRoles: ['super_admin'], catalog: service.engine.catalogEntries() }
  const record = emptyPolicyRecord()
  await PermissionEngine.load(service.db, shippedModelText, state, Date.now, record)
  const shadow = await ShadowEngine.load(writeImpliesReadModel, record, state)
  const draws = [0.1, 0.6, 0.2, 0.9]
  const comparer = new ShadowModelComparer(shadow, { sample: 0.5, random: () => draws.shift() ?? 1 })
  const answers = [0, 1, 2, 3].map(() => comparer.compare(asked(service, clerk, 'm1', 'products', 'read')))
  t.same(answers.map((a) => a !== null), [true, false, true, false], 'a draw under the share is compared')
  t.equal(comparer.compared, 2)
  const none = new ShadowModelComparer(shadow, { sample: 0 })
  t.equal(none.compare(asked(service, clerk, 'm1', 'products', 'read')), null)
  t.equal(none.compared, 0)
})
