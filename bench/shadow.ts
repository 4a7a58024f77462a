/**
 * npm run bench:shadow [rules]: what asking the shadow model costs a gateway
 * decision, in process. The live engine answers a stream of questions (the
 * shipped model, decision index), then the same stream with the comparer
 * asking the shadow (the bench's edited model, candidates path) after each,
 * as the decision pipeline will after every answer sent (SHADOW_SAMPLE=1).
 * The two are run in turn, five rounds, medians. Prints a markdown table.
 */
import { buildService } from '../src/compose.js'
import type { DecisionQuestion } from '../src/decisionLog/event.js'
import { declaredCatalog } from '../src/domain/permissions.js'
import { REASON_NAMES, allows } from '../src/engine/explain.js'
import { editedModelText, writeEditedModel } from './editedModel.js'
import { benchConfig, benchDatabase, benchSubject, postgresUrl, seedRules } from './seed.js'

const RULES = Number(process.argv[2] ?? 1000)
const ROUNDS = 5
const ROUND_MS = 1000

const store = await benchDatabase()
await seedRules(store.db, RULES)
// Admitted as at a start: the decisions file is run against the file.
const edited = writeEditedModel()
const config = { ...benchConfig(), shadowModel: { path: edited.path, sample: 1, text: editedModelText() } }
const service = await buildService(config, { db: store.db, skipFirstAdmin: true })
const { userId } = await benchSubject(service)
const account = await service.accounts.get(userId)
const shadow = service.shadow
if (account === null || shadow === null) throw new Error(`the bench needs its subject and an admitted shadow (${service.shadowRefusal ?? 'none'})`)

const questions = declaredCatalog().flatMap((p) => ['m1', 'm2'].map((domain) => [domain, p.obj, p.act] as const))
/** One gateway decision as the pipeline hands it over, with or without the shadow asked after it. */
const decide = (i: number, compare: boolean): unknown => {
  const [domain, obj, act] = questions[i % questions.length] as (typeof questions)[number]
  const code = service.engine.decision(account, domain, obj, act)
  const question: DecisionQuestion = { account, domain, obj, act, allowed: allows(code), reason: { kind: REASON_NAMES[code] } }
  return compare ? shadow.compare(question, String(i)) : question
}
const rate = (compare: boolean): number => {
  let calls = 0
  const started = performance.now()
  while (performance.now() - started < ROUND_MS) decide(calls++, compare)
  return calls / ((performance.now() - started) / 1000)
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number

rate(false)
rate(true)
const bare: number[] = []
const compared: number[] = []
for (let r = 0; r < ROUNDS; r++) {
  bare.push(rate(false))
  compared.push(rate(true))
}
const bareRate = median(bare)
const withRate = median(compared)
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const store_ = postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite'
process.stdout.write(
  [
    `| measure (${fmt(RULES)} rules, ${store_}, shadow on the ${shadow.engine?.mode ?? '?'} path) | value |`,
    '|---|---:|',
    `| decisions/s in process, live only (question built as the pipeline hands it over) | ${fmt(bareRate)} |`,
    `| decisions/s in process, each also compared by the shadow (SHADOW_SAMPLE=1) | ${fmt(withRate)} |`,
    `| compare() per decision | ${fmt(1e9 / withRate - 1e9 / bareRate)} ns |`,
    `| disagreements seen (the bench's edited model means the same as the shipped one) | ${fmt(shadow.disagreements().reduce((n, d) => n + d.count, 0))} of ${fmt(shadow.compared)} |`,
    '',
  ].join('\n'),
)
await service.close()
await store.drop()
edited.remove()
process.exit(0)
