/**
 * `/metrics` as Prometheus itself reads it: `promtool check metrics` parses
 * the text and lints names and types (counters end in `_total`, nothing
 * else does, a help text for each). It runs when promtool is on the PATH
 * (Debian's `prometheus` package; `.ci/run` installs it) and is skipped,
 * saying so, otherwise.
 */
import { spawn, spawnSync } from 'node:child_process'
import t from 'tap'
import { buildTestApp, onboard, register, tempDir } from '../helper.js'
import { eventually } from '../support/eventually.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the metrics text format')

const PROMTOOL_TIMEOUT_MS = 30_000

function promtoolMissing(): string | false {
  const found = spawnSync('promtool', ['--version'], { stdio: 'ignore', timeout: PROMTOOL_TIMEOUT_MS })
  return found.error !== undefined || found.status !== 0 ? 'promtool is not on the PATH (Debian: apt-get install prometheus)' : false
}

/** `promtool check metrics` over `text`: its exit code and what it printed. */
function checkMetrics(text: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'], timeout: PROMTOOL_TIMEOUT_MS })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, output }))
    child.stdin.end(text)
  })
}

t.test('promtool check metrics accepts /metrics', { skip: promtoolMissing() }, async (t) => {
  // Two sinks, one of them failing: every decision log series present.
  const ta = await buildTestApp(t, { env: { DECISION_LOG: 'all', DECISION_LOG_SINKS: `file:${tempDir(t)}/decisions.ndjson,http:http://127.0.0.1:9/nothing` } })
  await onboard(ta, 'm1')
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1' })
  // Every series present: decisions, logins of each outcome that needs no limit, a reload.
  await ta.call({ method: 'GET', url: `/v2/authz/check?obj=orders&act=read&user_id=${clerk.id}` })
  await ta.call({ method: 'GET', url: '/v2/authz/verify?obj=orders&act=read' })
  await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: 'clerk@m1.example', password: 'wrong-password' } } })
  await ta.call({ method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: 'clerk@m1.example', password: 'admin-pass-123' } } })
  await ta.service.reload()

  await eventually(async () => /^aps_decision_log_events_total\{sink="file"\} [1-9]/m.test((await ta.call({ method: 'GET', url: '/metrics', token: null })).body))
  const res = await ta.call({ method: 'GET', url: '/metrics', token: null })
  t.equal(res.statusCode, 200)
  t.match(res.body, /^aps_policy_reloads_total 1$/m, 'the reload is counted')
  t.match(res.body, /^aps_decision_log_events_total\{sink="file"\} 2$/m, 'both decisions written to the file')
  t.match(res.body, /^aps_decision_log_sink_write_seconds_count\{sink="file"\} [1-9]/m, 'file writes timed')
  t.match(res.body, /^aps_decision_log_dropped_total\{sink="http",reason="overflow_allow"\} 0$/m, 'drops by sink and reason')
  t.match(res.body, /^aps_decision_log_queue_depth\{sink="http"\} [0-9]/m, 'the failing sink holds its events')
  const { code, output } = await checkMetrics(res.body)
  t.equal(output.trim(), '', 'promtool reports nothing')
  t.equal(code, 0, 'promtool check metrics exits 0')
})
