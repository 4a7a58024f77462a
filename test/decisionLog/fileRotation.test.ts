/**
 * The `file:` sink's rotation by size and count: the current file keeps its
 * name and stays near its bound, rotated files are `<name>.1` (newest) to
 * `<name>.<n>`, older ones are removed, and no event is cut between files.
 * Then through the service: DECISION_LOG_FILE_MAX_BYTES and _MAX_FILES reach
 * the sink.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { DecisionEvent } from '../../src/decisionLog/event.js'
import { fileSink } from '../../src/decisionLog/streamSink.js'
import { buildTestApp, buildTestService, tempDir } from '../helper.js'
import { BENCH_ROUTE_MAP } from '../../bench/seed.js'
import { decisionEvent } from '../support/decisionEvents.js'
import { listeningWithClerk } from '../support/gatewayClerk.js'
import { eventually } from '../support/eventually.js'

const account = { id: '00000000-0000-4000-8000-000000000001', principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'clerk' }

const lines = (path: string): DecisionEvent[] =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as DecisionEvent)

t.test('rotated by size into <name>.1 … <name>.<n>, the oldest removed, every line whole', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'decisions.ndjson')
  const maxBytes = 4096
  const sink = fileSink(path, { maxBytes, maxFiles: 2 })
  const ids: string[] = []
  // 40 batches of 5 events (about 400 bytes each): some 80 KB through a 4 KB file.
  for (let batch = 0; batch < 40; batch++) {
    const events = Array.from({ length: 5 }, (_, i) => decisionEvent(account, { decision_id: `e-${batch * 5 + i}` }))
    ids.push(...events.map((e) => e.decision_id))
    await sink.write(events)
  }
  await sink.close()

  t.same(readdirSync(dir).sort(), ['decisions.ndjson', 'decisions.ndjson.1', 'decisions.ndjson.2'], 'the current file and two rotated ones, nothing older')
  const [current, newest, oldest] = [path, `${path}.1`, `${path}.2`].map(lines) as [DecisionEvent[], DecisionEvent[], DecisionEvent[]]
  for (const [name, file] of [['.1', `${path}.1`], ['.2', `${path}.2`]] as const) {
    const size = readFileSync(file).length
    // A batch is written whole, so a file passes its bound by less than one batch.
    t.ok(size >= maxBytes && size < maxBytes + 5 * 1000, `${name}: rotated once past ${maxBytes} bytes (${size})`)
  }
  t.ok(readFileSync(path).length < maxBytes + 5 * 1000, 'the current file within its bound')
  const kept = [...oldest, ...newest, ...current].map((e) => e.decision_id)
  t.same(kept, ids.slice(ids.length - kept.length), 'the newest events, in order, none cut or repeated across files')
  t.ok(kept.length < ids.length / 2, 'the oldest were removed with their file')
})

t.test('DECISION_LOG_FILE_MAX_BYTES and _MAX_FILES reach the file sink', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'gateway.ndjson')
  const service = await buildTestService(t, {
    env: { ROUTE_MAP_PATH: BENCH_ROUTE_MAP, DECISION_LOG_SINKS: `file:${path}`, DECISION_LOG_FILE_MAX_BYTES: '1024', DECISION_LOG_FILE_MAX_FILES: '1' },
  })
  const ta = await buildTestApp(t, { service })
  const { authorization, base } = await listeningWithClerk(t, ta)
  for (let i = 0; i < 30; i++) await (await fetch(`${base}/v2/authz/check?obj=orders&act=refund`, { headers: { authorization } })).text()
  t.ok(await eventually(() => existsSync(`${path}.1`)), 'rotated past 1 KiB')
  await service.decisionLog.close(Date.now() + 5000)
  t.same(readdirSync(dir).sort(), ['gateway.ndjson', 'gateway.ndjson.1'], 'one rotated file kept')
  t.ok(lines(`${path}.1`).every((e) => e.reason.kind === 'none'), 'whole events in the rotated file')
})
