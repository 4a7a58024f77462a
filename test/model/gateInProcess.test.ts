/**
 * The start-up gate on its own (the processes are in gate.test.ts): which
 * file it runs, on which policy, and what refuses a start.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { loadConfig } from '../../src/startup.js'
import { ModelDecisionsRefused, gateModelDecisions } from '../../src/modelGate.js'
import { migrate } from '../../src/storage/migrate.js'
import { insertRule } from '../../src/storage/policyRows.js'
import { TEST_SECRET, freshDatabase, tempDir } from '../helper.js'
import { repositoryRoot } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the model gate, on pglite://memory whatever DATABASE_URL says')

const shippedText = readFileSync(join(repositoryRoot, 'model.conf'), 'utf8')

function recorder() {
  const lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = []
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg: msg ?? '', obj: obj as Record<string, unknown> })
  return { lines, log: { info: at('info'), warn: at('warn'), error: at('error') } }
}

const config = (env: Record<string, string>) => loadConfig({ JWT_SECRET: TEST_SECRET, DATABASE_URL: 'pglite://memory', ...env })

t.test('a decisions file without a policy of its own is decided on the stored policy', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  await insertRule(db, 'p', ['clerk', 'm-1', 'orders', 'refund', 'allow'])
  await insertRule(db, 'p', ['user-bob', 'm-1', 'orders', 'refund', 'deny'])
  await insertRule(db, 'g', ['user-bob', 'clerk', 'm-1'])
  const dir = tempDir(t, 'aps-gate-')
  writeFileSync(join(dir, 'model.conf'), shippedText)
  writeFileSync(join(dir, 'edited.conf'), shippedText.replace(' && !some(where (p.eft == deny))', ''))
  writeFileSync(join(dir, 'model.decisions'), '# on the stored policy\nuser-bob, m-1, orders, refund -> deny\nclerk, m-1, orders, refund -> allow\n')

  const { lines, log } = recorder()
  await gateModelDecisions(config({ MODEL_PATH: join(dir, 'model.conf') }), db, log)
  t.match(lines, [{ level: 'info', msg: /the model gives all 2 decisions in .*model\.decisions/ }], 'the shipped model passes')

  const refused = await gateModelDecisions(config({ MODEL_PATH: join(dir, 'edited.conf'), MODEL_DECISIONS_PATH: join(dir, 'model.decisions') }), db).then(
    () => null,
    (error: unknown) => error,
  )
  t.type(refused, ModelDecisionsRefused)
  t.same((refused as ModelDecisionsRefused).lines, [`${join(dir, 'model.decisions')}:2: user-bob, m-1, orders, refund -> deny, but the model says allow`])
})

t.test('what a start is refused for, and what it is not', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const dir = tempDir(t, 'aps-gate-')
  writeFileSync(join(dir, 'model.conf'), shippedText)

  const missing = await gateModelDecisions(config({ MODEL_DECISIONS_PATH: join(dir, 'nowhere.decisions') }), db).catch((error: unknown) => error)
  t.type(missing, ModelDecisionsRefused, 'a named decisions file that is not there')
  t.match((missing as Error).message, /cannot read the decisions file at .*nowhere\.decisions/)

  writeFileSync(join(dir, 'broken.decisions'), 'clerk, m-1, orders -> allow\n')
  const broken = await gateModelDecisions(config({ MODEL_DECISIONS_PATH: join(dir, 'broken.decisions') }), db).catch((error: unknown) => error)
  t.type(broken, ModelDecisionsRefused, 'a decisions file that does not read')
  t.match((broken as Error).message, /broken\.decisions:1: expected/)

  const quiet = recorder()
  await gateModelDecisions(config({ MODEL_PATH: join(dir, 'model.conf') }), db, quiet.log)
  t.match(quiet.lines, [{ level: 'warn', msg: /no decisions file beside the model/ }], 'no file beside a model, none named: a warning, no refusal')

  const allowed = recorder()
  await gateModelDecisions(config({ MODEL_DECISIONS_PATH: join(dir, 'broken.decisions'), ALLOW_FAILING_MODEL_DECISIONS: 'true' }), db, allowed.log)
  t.match(allowed.lines, [{ level: 'error', msg: /^ALLOW_FAILING_MODEL_DECISIONS=true: starting although/ }], 'the override starts, logged as an error')
  t.throws(() => config({ ALLOW_FAILING_MODEL_DECISIONS: 'yes' }), 'the override is true or false, nothing else')
})
