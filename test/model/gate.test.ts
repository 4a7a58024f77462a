/**
 * The model gates the start: the server runs the decisions file against
 * the model before it serves, refuses with exit 78 naming each failing
 * line, starts anyway only when told to (and says so as an error), and logs
 * which decision path the model gets and what a decision costs.
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { EXIT_MODEL_DECISIONS } from '../../src/modelGate.js'
import { TEST_SECRET, tempDir } from '../helper.js'
import { LOG_LEVELS, processDatabase, repositoryRoot, startServer, type LogLine } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the model file gates the start, whatever the back end')

const shipped = readFileSync(join(repositoryRoot, 'model.conf'), 'utf8')
const decisions = readFileSync(join(repositoryRoot, 'model.decisions'), 'utf8')
const withoutDeny = shipped.replace(' && !some(where (p.eft == deny))', '')

/** The line number in model.decisions of the decision starting with `text`. */
function lineOf(text: string): number {
  const index = decisions.split('\n').findIndex((l) => l.startsWith(text))
  if (index < 0) throw new Error(`model.decisions has no line ${text}`)
  return index + 1
}

/** The deny-beats-allow decisions: the model without its deny part gets each of them wrong. */
const DENY_LINES = ['user-bob, m-1, orders, refund -> deny', 'user-alice, m-1, orders, delete -> deny', 'user-olga, m-1, merchant, suspend -> deny']

/** A start on a busy machine's embedded store can take a minute or more. */
const START_MS = 180_000
const env = (url: string, extra: Record<string, string> = {}) => ({ DATABASE_URL: url, JWT_SECRET: TEST_SECRET, ...extra })
const msg = (pattern: RegExp) => (line: LogLine) => typeof line.msg === 'string' && pattern.test(line.msg)

// Starting processes on an embedded store is slow on a busy machine: the three starts share one store, one after another.
t.setTimeout(900_000)
const db = await processDatabase(t)

t.test('a model that fails its decisions does not start: exit 78, each failing line on stderr', async (t) => {
  t.not(withoutDeny, shipped, 'the deny part was taken out')
  const dir = tempDir(t, 'aps-gate-')
  writeFileSync(join(dir, 'model.conf'), withoutDeny)
  copyFileSync(join(repositoryRoot, 'model.decisions'), join(dir, 'model.decisions'))
  const server = await startServer(t, { waitUntilHealthy: false, env: env(db.url, { MODEL_PATH: join(dir, 'model.conf') }) })
  const exit = await server.exited
  t.equal(exit.code, EXIT_MODEL_DECISIONS, 'exit code 78')
  t.equal(EXIT_MODEL_DECISIONS, 78)
  const stderr = server.stderr()
  t.match(stderr, /cannot start: \d+ of \d+ decisions in .*model\.decisions do not hold for the model .*model\.conf/)
  for (const line of DENY_LINES) {
    t.ok(stderr.includes(`model.decisions:${lineOf(line)}: ${line}, but the model says allow`), `names ${line}`)
  }
  t.notOk(server.output().includes('service ready'), 'it never served')
})

t.test('ALLOW_FAILING_MODEL_DECISIONS=true starts it anyway, with an error in the log naming each line', async (t) => {
  const dir = tempDir(t, 'aps-gate-')
  writeFileSync(join(dir, 'model.conf'), withoutDeny)
  copyFileSync(join(repositoryRoot, 'model.decisions'), join(dir, 'model.decisions'))
  const server = await startServer(t, { startTimeoutMs: START_MS, env: env(db.url, { MODEL_PATH: join(dir, 'model.conf'), ALLOW_FAILING_MODEL_DECISIONS: 'true' }) })
  t.ok(server.running(), 'it serves')
  const error = await server.waitForLog(msg(/^ALLOW_FAILING_MODEL_DECISIONS=true: starting although/))
  t.equal(error.level, LOG_LEVELS.error, 'logged as an error')
  const failures = error.failures as string[]
  for (const line of DENY_LINES) t.ok(failures.some((f) => f.includes(`model.decisions:${lineOf(line)}: ${line}`)), `names ${line}`)
  const path = await server.waitForLog(msg(/decisions will use Casbin's matcher and effect over the rows a question can match/))
  t.equal(path.decision_path, 'candidates', 'the log says which path it gets')
  t.ok(typeof path.decisions_per_second === 'number' && path.decisions_per_second > 0, `and what it costs: ${String(path.decisions_per_second)} a second`)
  await server.stop()
})

t.test('the shipped model starts: its decisions hold and it gets the decision index', async (t) => {
  const server = await startServer(t, { startTimeoutMs: START_MS, env: env(db.url) })
  const held = await server.waitForLog(msg(/^the model gives all \d+ decisions in .*model\.decisions$/))
  t.equal(held.level, LOG_LEVELS.info)
  t.equal(held.decisions_checked, decisions.split('\n').filter((l) => l.replace(/#.*$/, '').includes('->')).length, 'every decision was run')
  const path = await server.waitForLog(msg(/^decisions will use the decision index: [\d,]+ uncached decisions a second, measured at/))
  t.equal(path.decision_path, 'index')
  t.ok(typeof path.decisions_per_second === 'number' && path.decisions_per_second > 0)
  t.same(server.logs().filter((l) => (l.level ?? 0) >= LOG_LEVELS.error), [], 'no error logged')
  const exit = await server.stop()
  t.equal(exit.code, 0)
})
