/**
 * npm run bench:holders: who holds a pair, answered from memory over a large
 * policy. It seeds BENCH_RULES role grants (default 1,000,000, as `npm run
 * bench` does) and BENCH_USERS accounts (default 100,000: four in five
 * merchant users spread over 50 merchants and the sub-roles of the grants,
 * one in five system-owner users on ten platform sub-roles with `global`
 * grants, one merchant user in eight with an allow override), then times a
 * page of holders (the command, and the HTTP route through inject): the
 * first page after a change (the list worked out from memory), the next one
 * (the kept list sorted once) and any after that (a slice); and the heap per
 * rule of the engine, with the role grants alone and with the users' rows.
 * PostgreSQL with DATABASE_URL=postgres://…, else an in-memory PGlite.
 */
import { cpus, totalmem } from 'node:os'
import { listPermissionHolders } from '../src/commands/accessReview.js'
import type { Caller } from '../src/commands/context.js'
import { declaredCatalog } from '../src/domain/permissions.js'
import app from '../src/http/app.js'
import { createFastify } from '../src/http/fastifyOptions.js'
import type { Database } from '../src/storage/db.js'
import { benchConfig, benchDatabase, benchService, measuredEngine, postgresUrl, seedRules } from './seed.js'

const gc = (globalThis as { gc?: () => void }).gc
const RULES = Number(process.env.BENCH_RULES ?? 1_000_000)
const USERS = Number(process.env.BENCH_USERS ?? 100_000)
const MERCHANTS = 50
const PLATFORM_ROLES = 10
const RUNS = 21

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number
const rows: Array<[string, string, string]> = []
const record = (what: string, value: string, note = '') => {
  rows.push([what, value, note])
  process.stderr.write(`  ${what}: ${value} ${note}\n`)
}


/** Accounts, their `g` rows, the platform sub-roles' `global` grants and some overrides, written directly. */
async function seedUsers(db: Database): Promise<void> {
  const pairs = declaredCatalog()
  const roles = Math.ceil(RULES / (MERCHANTS * pairs.length))
  const system = Math.floor(USERS / 5)
  await db.query(`INSERT INTO merchants (id) SELECT 'm' || i FROM generate_series(0, ${MERCHANTS - 1}) AS i`)
  await db.query(`INSERT INTO sub_roles (code) SELECT 'role_' || i FROM generate_series(0, ${roles - 1}) AS i`)
  await db.query(`INSERT INTO sub_roles (code) SELECT 'sys_' || i FROM generate_series(0, ${PLATFORM_ROLES - 1}) AS i`)
  await db.query(
    `INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code, parent_role)
     SELECT gen_random_uuid(), 'user' || i || '@m' || (i % ${MERCHANTS}) || '.bench', 'x', 'User ' || i, 'merchant',
            'm' || (i % ${MERCHANTS}), 'role_' || (i % ${roles}), 'system_owner'
     FROM generate_series(1, $1::int) AS i`,
    [USERS - system - MERCHANTS - 1],
  )
  await db.query(
    `INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code, parent_role)
     SELECT gen_random_uuid(), 'staff' || i || '@platform.bench', 'x', 'Staff ' || i, 'system_owner', NULL, 'sys_' || (i % ${PLATFORM_ROLES}), 'system_owner'
     FROM generate_series(1, $1::int) AS i`,
    [system],
  )
  // Every merchant's super_admin and the platform's: root users hold every pair in reach.
  await db.query(
    `INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code, parent_role)
     SELECT gen_random_uuid(), 'owner@m' || i || '.bench', 'x', 'Owner', 'merchant', 'm' || i, 'super_admin', 'system_owner'
     FROM generate_series(0, ${MERCHANTS - 1}) AS i`,
  )
  await db.query(
    `INSERT INTO admin_accounts (id, email, password_hash, name, principal_type, merchant_id, sub_role_code, parent_role)
     VALUES (gen_random_uuid(), 'root@platform.bench', 'x', 'Root', 'system_owner', NULL, 'super_admin', NULL)`,
  )
  await db.query(
    `INSERT INTO casbin_rule (ptype, v0, v1, v2) SELECT 'g', id::text, sub_role_code, coalesce(merchant_id, 'global') FROM admin_accounts`,
  )
  // Platform sub-roles: the first half hold every pair in `global`, the rest the read pairs only.
  await db.query(
    `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4)
     SELECT 'p', 'sys_' || r, 'global', p.obj, p.act, 'allow'
     FROM generate_series(0, ${PLATFORM_ROLES - 1}) AS r, unnest($1::text[], $2::text[]) AS p(obj, act)
     WHERE r < ${PLATFORM_ROLES / 2} OR p.act = 'read'`,
    [pairs.map((p) => p.obj), pairs.map((p) => p.act)],
  )
  await db.query(
    `INSERT INTO permission_overrides (user_id, domain, obj, act, effect, set_by)
     SELECT id, merchant_id, 'customers', 'export', 'allow', 'bench' FROM admin_accounts
     WHERE principal_type = 'merchant' AND sub_role_code <> 'super_admin' AND abs(hashtext(id::text)) % 8 = 0`,
  )
  await db.query('ANALYZE')
}

const started = new Date()
const command = `npm run bench:holders${postgresUrl !== undefined ? ' (DATABASE_URL=postgres://…)' : ''}`
process.stderr.write(`running ${command}\n`)
const store = await benchDatabase()
const { db } = store
try {
  let t0 = performance.now()
  await seedRules(db, RULES)
  process.stderr.write(`  seeded ${fmt(RULES)} rules in ${fmt(performance.now() - t0)} ms\n`)
  const rulesOnly = await measuredEngine(db)
  record(`heap per rule (Casbin model + index), ${fmt(rulesOnly.rules)} role grants, no accounts`, `${fmt(rulesOnly.heapPerRule)} B`, gc === undefined ? '(run with --expose-gc)' : '')

  t0 = performance.now()
  await seedUsers(db)
  process.stderr.write(`  seeded ${fmt(USERS)} accounts and their rows in ${fmt(performance.now() - t0)} ms\n`)
  const withUsers = await measuredEngine(db)
  record(`heap per rule (Casbin model + index), ${fmt(withUsers.rules)} rows with ${fmt(USERS)} accounts' g rows and overrides`, `${fmt(withUsers.heapPerRule)} B`)
  record('cold load of the engine, same rows', `${fmt(withUsers.loadMs)} ms`)

  const service = await benchService(db)
  const root = await service.accounts.get(
    (await db.query<{ id: string }>("SELECT id::text AS id FROM admin_accounts WHERE email = 'root@platform.bench'")).rows[0]?.id ?? '',
  )
  if (root === null || service.tokens === null) throw new Error('the bench root is missing')
  const caller: Caller = { account: root, ip: null }
  const cases: Array<[string, { obj: string; act: string; domain?: string; page?: number; page_size?: number }]> = [
    ['orders:read in m1 (merchant users + platform staff), page 1 of 20', { obj: 'orders', act: 'read', domain: 'm1' }],
    ['orders:read in m1, page 1 of 100', { obj: 'orders', act: 'read', domain: 'm1', page_size: 100 }],
    ['orders:read in m1, page 100 of 100', { obj: 'orders', act: 'read', domain: 'm1', page: 100, page_size: 100 }],
    ['orders:refund in global (half the platform staff), page 1 of 20', { obj: 'orders', act: 'refund', domain: 'global' }],
    ['customers:export in m7 (overrides + grants), page 1 of 20', { obj: 'customers', act: 'export', domain: 'm7' }],
    ['reports:read in global (all platform staff), page 1 of 20', { obj: 'reports', act: 'read' }],
  ]
  for (const [name, query] of cases) {
    const first = await listPermissionHolders(service, caller, query)
    const cold: number[] = []
    const second: number[] = []
    const later: number[] = []
    for (let i = 0; i < RUNS; i++) {
      // Any change of the accounts (here one put back as it was) drops the kept lists: the list is worked out again.
      service.accounts.put(root)
      for (const [times, page] of [
        [cold, query.page ?? 1],
        [second, (query.page ?? 1) + 1],
        [later, (query.page ?? 1) + 2],
      ] as const) {
        const t = performance.now()
        await listPermissionHolders(service, caller, { ...query, page })
        times.push(performance.now() - t)
      }
    }
    const figure = (times: number[]) => `${fmt(median(times), 2)} ms`
    const note = (times: number[], extra = '') => `(median of ${RUNS}; slowest ${fmt(Math.max(...times), 2)} ms${extra})`
    record(`holders: ${name}, first page after a change`, figure(cold), note(cold, `; ${fmt(first.total)} holders`))
    record(`holders: ${name}, the next page (sorts the kept list once)`, figure(second), note(second))
    record(`holders: ${name}, any page after that`, figure(later), note(later))
  }

  const fastify = createFastify({ ...benchConfig(), logLevel: 'silent' })
  await fastify.register(app, { service })
  await fastify.ready()
  const token = service.tokens.issue(root, 3600).access_token
  const url = '/v2/admin/permissions/holders?obj=orders&act=read&domain=m1&page_size=100'
  const times: number[] = []
  for (let i = 0; i < RUNS + 1; i++) {
    service.accounts.put(root)
    const t = performance.now()
    const res = await fastify.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } })
    if (res.statusCode !== 200) throw new Error(`holders answered ${res.statusCode}: ${res.body}`)
    if (i > 0) times.push(performance.now() - t)
  }
  record(
    `HTTP GET ${url} (inject, whole request, first page after a change)`,
    `${fmt(median(times), 2)} ms`,
    `(median of ${RUNS}; slowest ${fmt(Math.max(...times), 2)} ms)`,
  )
  await fastify.close()
  await service.close()
} finally {
  await store.drop()
}

const cpu = cpus()[0]?.model ?? 'unknown CPU'
process.stdout.write(
  [
    `command: ${command}`,
    `date: ${started.toISOString()}`,
    `machine: ${cpus().length} × ${cpu}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`,
    `store: ${postgresUrl !== undefined ? 'PostgreSQL' : 'PGlite (in memory)'}; ${fmt(RULES)} role grants, ${fmt(USERS)} accounts`,
    '',
    '| measure | value | note |',
    '|---|---:|---|',
    ...rows.map(([what, value, note]) => `| ${what} | ${value} | ${note} |`),
    '',
  ].join('\n'),
)
process.exit(0)
