/**
 * SHADOW_MODEL_PATH at start-up (read, admitted or refused) and the shadow
 * engine kept in step with the live one through every kind of change.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../../src/config.js'
import type { Account } from '../../src/domain/principals.js'
import type { Service } from '../../src/compose.js'
import { loadConfig } from '../../src/startup.js'
import { TEST_SECRET, buildTestApp, buildTestService, onboard, register, tempDir } from '../helper.js'
import { ManualClock } from '../support/manualClock.js'
import { roleCommand, userCommand } from '../support/permissionCommands.js'
import { shippedModelText, writeImpliesReadModel } from '../support/shadowModels.js'

function recorder() {
  const lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = []
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg: msg ?? '', obj: obj as Record<string, unknown> })
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } }
}

function modelFile(t: Parameters<typeof tempDir>[0], text: string): string {
  const path = join(tempDir(t, 'aps-shadow-'), 'shadow.conf')
  writeFileSync(path, text)
  return path
}

/** The live and the shadow engine's answers for one user and pair in `domain`. */
function both(service: Service, user: Account, domain: string, obj: string, act: string): { live: boolean; shadow: boolean | undefined } {
  return { live: service.engine.decide(user, domain, obj, act), shadow: shadowEngine(service)?.decide(user, domain, obj, act) }
}

const shadowEngine = (service: Service) => service.shadow?.engine ?? null

t.test('SHADOW_MODEL_PATH and SHADOW_SAMPLE as the settings read them', async (t) => {
  const config = (env: Record<string, string>) => loadConfig({ JWT_SECRET: TEST_SECRET, DATABASE_URL: 'pglite://memory', ...env })
  t.equal(config({}).shadowModel, null, 'no shadow unless named')
  const path = modelFile(t, writeImpliesReadModel)
  t.same(config({ SHADOW_MODEL_PATH: path }).shadowModel, { path, sample: 1, text: writeImpliesReadModel }, 'every decision by default; start-up read the file')
  t.equal(config({ SHADOW_MODEL_PATH: path, SHADOW_SAMPLE: '0.25' }).shadowModel?.sample, 0.25)
  t.equal(config({ SHADOW_MODEL_PATH: path, SHADOW_SAMPLE: '0' }).shadowModel?.sample, 0)
  for (const bad of ['1.5', '-0.1', 'true', 'half', '2']) t.throws(() => config({ SHADOW_MODEL_PATH: path, SHADOW_SAMPLE: bad }), ConfigError, `SHADOW_SAMPLE=${bad}`)
  t.match(config({ SHADOW_MODEL_PATH: join(path, '..', 'nowhere.conf') }).shadowModel, { unreadable: /cannot read the shadow model at .*nowhere\.conf/ }, 'a file that cannot be read does not stop the start')
})

t.test('a shadow model that fails is refused and logged, and the service starts without it', async (t) => {
  const dir = tempDir(t, 'aps-shadow-')
  const cases: Array<[string, string, RegExp]> = [
    ['a file that is not there', join(dir, 'nowhere.conf'), /cannot read the shadow model at .*nowhere\.conf/],
    ['a model outside the family', modelFile(t, shippedModelText.replace(/\[role_definition\][^[]*/, '')), /shadow\.conf: .*role definition/],
    ['a model that fails the decisions file', modelFile(t, shippedModelText.replace(' && !some(where (p.eft == deny))', '')), /decisions in .*model\.decisions do not hold for the model .*shadow\.conf/],
  ]
  for (const [name, path, why] of cases) {
    const { lines, log } = recorder()
    const service = await buildTestService(t, { env: { SHADOW_MODEL_PATH: path }, log })
    t.equal(service.shadow, null, `${name}: no shadow`)
    t.match(service.shadowRefusal, why, `${name}: why it was refused`)
    t.match(lines.filter((l) => l.level === 'error'), [{ msg: /^the shadow model is refused, the service runs without it: /, obj: { shadow_model: path, refusal: why } }], `${name}: one error line`)
  }
  const admitted = await buildTestService(t, { env: { SHADOW_MODEL_PATH: modelFile(t, writeImpliesReadModel) } })
  t.not(admitted.shadow, null, 'an edited model that gives every decision is admitted')
  t.equal(admitted.shadowRefusal, null)
})

t.test('the shadow follows every change the live engine is given', async (t) => {
  const clock = new ManualClock()
  const ta = await buildTestApp(t, { clock, env: { SHADOW_MODEL_PATH: modelFile(t, writeImpliesReadModel) } })
  const { service } = ta
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  t.not(shadowEngine(service), null)

  t.equal((await roleCommand(ta, 'grant', 'clerk', { obj: 'products', act: 'write', domain: 'm1' })).statusCode, 200)
  t.same(both(service, clerk, 'm1', 'products', 'write'), { live: true, shadow: true }, 'a role grant reaches both')
  t.same(both(service, clerk, 'm1', 'products', 'read'), { live: false, shadow: true }, 'where the models differ, each answers as its model says')

  t.equal((await userCommand(ta, 'deny', clerk, { obj: 'products', act: 'write', domain: 'm1' })).statusCode, 200)
  t.same(both(service, clerk, 'm1', 'products', 'write'), { live: false, shadow: false }, "a user's deny reaches both")
  t.equal((await userCommand(ta, 'revoke', clerk, { obj: 'products', act: 'write', domain: 'm1' })).statusCode, 200)
  t.equal((await roleCommand(ta, 'revoke', 'clerk', { obj: 'products', act: 'write', domain: 'm1' })).statusCode, 200)
  t.same(both(service, clerk, 'm1', 'products', 'read'), { live: false, shadow: false }, 'a revoke reaches both')

  t.equal((await roleCommand(ta, 'grant', 'clerk', { obj: 'orders', act: 'refund', domain: 'm1' })).statusCode, 200)
  const catalog = service.engine.catalogEntries()
  await service.replica.applyCommitted(service.replica.revision + 1, [
    { kind: 'catalog', entries: catalog.map((e) => (e.obj === 'orders' && e.act === 'refund' ? { ...e, is_active: false } : e)) },
  ])
  t.same(both(service, clerk, 'm1', 'orders', 'refund'), { live: false, shadow: false }, 'a catalog change reaches both')
  await service.replica.applyCommitted(service.replica.revision + 1, [{ kind: 'sub_role', code: 'clerk', is_root: true }])
  t.same(both(service, clerk, 'm1', 'payouts', 'approve'), { live: true, shadow: true }, 'a root sub-role reaches both')

  await service.reload()
  t.same(both(service, clerk, 'm1', 'orders', 'refund'), { live: true, shadow: true }, 'a reload loads both from the store again')
  t.same(both(service, clerk, 'm1', 'payouts', 'approve'), { live: false, shadow: false })

  const expiresAt = new Date(clock.now() + 60_000).toISOString()
  t.equal((await userCommand(ta, 'grant', clerk, { obj: 'customers', act: 'export', domain: 'm1', expires_at: expiresAt })).statusCode, 200)
  t.same(both(service, clerk, 'm1', 'customers', 'export'), { live: true, shadow: true }, 'an override that expires counts on both until then')
  clock.advance(60_000)
  // In the replica's queue right behind the expiry and ahead of the sweep's write: what the timers alone did.
  const atExpiry = await service.replica.hold(async () => both(service, clerk, 'm1', 'customers', 'export'))
  t.same(atExpiry, { live: false, shadow: false }, 'its instant takes it out of both, before any write')
})
