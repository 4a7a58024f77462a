/** GET /v2/admin/model/shadow and the shadow's metrics. */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { allows, REASON_NAMES } from '../../src/engine/explain.js'
import { buildTestApp, onboard, register, tempDir } from '../helper.js'
import { roleCommand } from '../support/permissionCommands.js'
import { shippedModelText, writeImpliesReadModel } from '../support/shadowModels.js'

function modelFile(t: Parameters<typeof tempDir>[0], text: string): string {
  const path = join(tempDir(t, 'aps-shadow-'), 'shadow.conf')
  writeFileSync(path, text)
  return path
}

t.test('the summary counts what the comparer saw; the metrics say the same', async (t) => {
  const ta = await buildTestApp(t, { env: { SHADOW_MODEL_PATH: modelFile(t, writeImpliesReadModel), SHADOW_SAMPLE: '1' } })
  const { service } = ta
  const owner = await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  t.equal((await roleCommand(ta, 'grant', 'clerk', { obj: 'products', act: 'write', domain: 'm1' })).statusCode, 200)
  const ask = (obj: string, act: string, id: string) => {
    const code = service.engine.decision(clerk, 'm1', obj, act)
    return service.shadow?.compare({ account: clerk, domain: 'm1', obj, act, allowed: allows(code), reason: { kind: REASON_NAMES[code] } }, id)
  }
  ask('products', 'write', 'a-1')
  ask('products', 'read', 'a-2')
  ask('products', 'read', 'a-3')

  const res = await ta.call({ method: 'GET', url: '/v2/admin/model/shadow' })
  t.equal(res.statusCode, 200, res.body)
  const data = res.json().data
  t.same(data, {
    enabled: true,
    model_id: service.shadow?.modelId,
    sample: 1,
    since: new Date(service.shadow?.since ?? 0).toISOString(),
    compared: 3,
    disagreements: [{ obj: 'products', act: 'read', count: 2, decision_ids: ['a-2', 'a-3'] }],
  })
  t.match(data.model_id, /^[0-9a-f]{12}$/)

  const merchant = await ta.call({ method: 'GET', url: '/v2/admin/model/shadow', token: ta.tokenFor(owner) })
  t.equal(merchant.statusCode, 403)
  t.equal(merchant.json().response_code, '301', 'merchant callers get the refusal of every system-only route')

  const metrics = (await ta.call({ method: 'GET', url: '/metrics' })).body
  t.match(metrics, /^aps_shadow_comparisons_total 3$/m)
  t.match(metrics, /^aps_shadow_disagreements_total\{obj="products",act="read"\} 2$/m)
})

t.test('without a shadow, the summary says why', async (t) => {
  const none = await buildTestApp(t)
  t.match((await none.call({ method: 'GET', url: '/v2/admin/model/shadow' })).json().data, { enabled: false, reason: /no shadow model is configured/, compared: 0, disagreements: [] })
  t.match((await none.call({ method: 'GET', url: '/metrics' })).body, /^aps_shadow_comparisons_total 0$/m)

  const refused = await buildTestApp(t, { env: { SHADOW_MODEL_PATH: modelFile(t, shippedModelText.replace(' && !some(where (p.eft == deny))', '')) } })
  t.match((await refused.call({ method: 'GET', url: '/v2/admin/model/shadow' })).json().data, {
    enabled: false,
    reason: /^the shadow model was refused at start: .*do not hold/,
    model_id: null,
  })
})
