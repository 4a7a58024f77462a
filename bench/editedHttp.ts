/**
 * npm run bench:edited-http (also part of `npm run bench` on PostgreSQL): the
 * HTTP check with an edited model of the family beside the shipped model, in
 * one run. Two servers follow one seeded PostgreSQL schema: one started with
 * the shipped model.conf, one with the same matcher rewritten
 * (`r.act == p.act && r.obj == p.obj`). Every question is different from the
 * ones before it (BENCH_EDITED_USERS users × every catalog pair, asked in
 * turn), and a role grant or revoke is written every 250 ms through one
 * server or the other, alternately: each write clears the edited model's
 * decision cache and reaches the other server through the change feed, as
 * it does between replicas. The servers are loaded in turn, the order
 * rotating, and the ratio edited / shipped is taken within each round.
 * PostgreSQL only (DATABASE_URL=postgres://…): two processes cannot share an
 * embedded PGlite.
 */
import { cpus, totalmem } from 'node:os'
import autocannon from 'autocannon'
import { declaredCatalog } from '../src/domain/permissions.js'
import { EDITED_MATCHER, writeEditedModel } from './editedModel.js'
import { median, processCpuMicros, spawnServer, type Server } from './http.js'
import { benchDatabase, benchService, benchSubject, postgresUrl, seedRules } from './seed.js'

const RULES = Number(process.env.BENCH_EDITED_RULES ?? 20_000)
const USERS = Number(process.env.BENCH_EDITED_USERS ?? 2_000)
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 3)
const ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? 5)
const WRITE_EVERY_MS = 250
const MERCHANTS = 50

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })

if (postgresUrl === undefined) {
  process.stdout.write('bench:edited-http needs DATABASE_URL=postgres://… (two server processes share one store): skipped\n')
  process.exit(0)
}

const editedModel = writeEditedModel()
const editedPath = editedModel.path

const store = await benchDatabase()
const { db } = store
await seedRules(db, RULES)
const service = await benchService(db)
await benchSubject(service)
const roles = Math.ceil(RULES / (MERCHANTS * declaredCatalog().length))
await db.query(`INSERT INTO merchants (id) SELECT 'm' || i FROM generate_series(0, ${MERCHANTS - 1}) AS i ON CONFLICT DO NOTHING`)
await db.query(`INSERT INTO sub_roles (code) SELECT 'role_' || i FROM generate_series(0, ${roles - 1}) AS i ON CONFLICT DO NOTHING`)
// The askers: merchant users spread over the merchants and the sub-roles of the grants, linked at home as the service links them.
await db.query(
  `INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code, parent_role)
   SELECT gen_random_uuid(), 'asker' || i || '@bench', 'x', 'Asker ' || i, 'merchant', 'm' || (i % ${MERCHANTS}), 'role_' || (i % ${roles}), 'system_owner'
   FROM generate_series(1, $1::int) AS i`,
  [USERS],
)
await db.query(`INSERT INTO casbin_rule (ptype, v0, v1, v2) SELECT 'g', id::text, sub_role_code, merchant_id FROM admin_accounts WHERE email LIKE 'asker%@bench'`)
const askers = await db.query<{ id: string; merchant_id: string }>(`SELECT id::text, merchant_id FROM admin_accounts WHERE email LIKE 'asker%@bench' ORDER BY email`)
const owner = await db.query<{ id: string }>(`SELECT id::text FROM admin_accounts WHERE email = 'owner@m1.bench'`)
const tokens = service.tokens
if (tokens === null || owner.rows[0] === undefined) throw new Error('the bench needs JWT_SECRET and the m1 owner')
const writerToken = tokens.issue({ id: owner.rows[0].id, principal_type: 'merchant', merchant_id: 'm1' }, 86400).access_token

/** Every asker with every catalog pair, in an order where consecutive questions differ in user and pair. */
const pairs = declaredCatalog()
const questions: Array<{ path: string; authorization: string }> = []
const askerTokens = askers.rows.map((a) => `Bearer ${tokens.issue({ id: a.id, principal_type: 'merchant', merchant_id: a.merchant_id }, 86400).access_token}`)
for (let k = 0; k < pairs.length; k++) {
  for (let u = 0; u < askers.rows.length; u++) {
    const pair = pairs[(k + u) % pairs.length] as (typeof pairs)[number]
    const asker = askers.rows[u] as { merchant_id: string }
    questions.push({ path: `/v2/authz/check?obj=${encodeURIComponent(pair.obj)}&act=${encodeURIComponent(pair.act)}&domain=${asker.merchant_id}`, authorization: askerTokens[u] as string })
  }
}
await service.close()

const env = (modelPath: string) => ({ ...process.env, BENCH_MODEL_PATH: modelPath })
const shipped = await spawnServer('./server.ts', [String(RULES), store.schema as string], [], env(new URL('../model.conf', import.meta.url).pathname))
const edited = await spawnServer('./server.ts', [String(RULES), store.schema as string], [], env(editedPath))
const servers: Array<[string, Server]> = [
  ['shipped model.conf', shipped],
  [`edited: ${EDITED_MATCHER}`, edited],
]

/** A role grant, then its revoke, and so on, every 250 ms, through each server in turn. */
function startWriter(): { stop: () => Promise<{ writes: number; failed: number }> } {
  let writes = 0
  let failed = 0
  let pending: Promise<void> = Promise.resolve()
  const timer = setInterval(() => {
    const server = (servers[writes % 2] as [string, Server])[1]
    const grant = Math.floor(writes / 2) % 2 === 0
    writes++
    pending = fetch(`${server.base}/v2/admin/permissions/roles/role_1/${grant ? 'grant' : 'revoke'}`, {
      method: grant ? 'POST' : 'DELETE',
      headers: { authorization: `Bearer ${writerToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ command: grant ? 'grant-role-permission' : 'revoke-role-permission', data: { obj: 'orders', act: 'cancel', domain: 'm1' } }),
    }).then(
      (answer) => {
        if (!answer.ok) failed++
      },
      () => {
        failed++
      },
    )
  }, WRITE_EVERY_MS)
  return {
    stop: async () => {
      clearInterval(timer)
      await pending
      return { writes, failed }
    },
  }
}

interface Run {
  rps: number
  cpuPerRequest: number
}

let next = 0
async function load(server: Server, seconds: number): Promise<Run> {
  const before = processCpuMicros(server.pid)
  const result = await autocannon({
    url: server.base,
    connections: 32,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        setupRequest: (request) => {
          const question = questions[next++ % questions.length] as (typeof questions)[number]
          return { ...request, path: question.path, headers: { authorization: question.authorization } }
        },
      },
    ],
  })
  const after = processCpuMicros(server.pid)
  const wrong = result.requests.total - (result.statusCodeStats?.['200']?.count ?? 0)
  if (wrong > 0 || result.errors > 0) throw new Error(`${wrong} checks were not answered 200 (${result.errors} errors)`)
  return { rps: result.requests.average, cpuPerRequest: (after - before) / Math.max(1, result.requests.total) }
}

const started = new Date()
const runs: Run[][] = servers.map(() => [])
const writer = startWriter()
let written = { writes: 0, failed: 0 }
try {
  for (const [, server] of servers) await load(server, 2)
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < servers.length; k++) {
      const s = (round + k) % servers.length
      ;(runs[s] as Run[]).push(await load((servers[s] as [string, Server])[1], SECONDS))
    }
  }
} finally {
  written = await writer.stop()
  for (const [, server] of servers) await server.stop()
  await store.drop()
  editedModel.remove()
}
if (written.failed > 0) throw new Error(`${written.failed} of ${written.writes} writes failed`)

const ratio = (figure: (run: Run) => number) => median((runs[1] as Run[]).map((run, i) => figure(run) / figure((runs[0] as Run[])[i] as Run)))
const lines = [
  `command: DATABASE_URL=postgres://… npm run bench:edited-http`,
  `date: ${started.toISOString()}`,
  `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
  `store: PostgreSQL, ${fmt(RULES)} role grants, ${fmt(USERS)} askers × ${pairs.length} pairs = ${fmt(questions.length)} questions asked in turn; a write every ${WRITE_EVERY_MS} ms; autocannon, 32 connections, ${SECONDS} s per run, ${ROUNDS} rounds, medians`,
  '',
  '| model | check req/s | server CPU per request |',
  '|---|---:|---:|',
  ...servers.map(([name], s) => `| ${name} | ${fmt(median((runs[s] as Run[]).map((r) => r.rps)))} | ${fmt(median((runs[s] as Run[]).map((r) => r.cpuPerRequest)), 1)} µs |`),
  '',
  '| measure | value | note |',
  '|---|---:|---|',
  `| edited / shipped, req/s (median of the rounds) | ${fmt(ratio((r) => r.rps), 2)} | (target >= 0.8) |`,
  `| edited / shipped, requests per server CPU second | ${fmt(ratio((r) => 1 / r.cpuPerRequest), 2)} | |`,
  `| writes during the runs (role grant / revoke, every ${WRITE_EVERY_MS} ms) | ${fmt(written.writes)} | (all answered 2xx) |`,
  '',
]
process.stdout.write(lines.join('\n'))
process.exit(0)
