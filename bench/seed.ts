import { randomBytes } from 'node:crypto'
import { buildService, type Service } from '../src/compose.js'
import { loadConfig } from '../src/startup.js'
import { registerAdmin } from '../src/commands/registerAdmin.js'
import { onboardMerchant } from '../src/commands/onboardMerchant.js'
import { SYSTEM_ACTOR } from '../src/domain/audit.js'
import { declaredCatalog } from '../src/domain/permissions.js'
import { PermissionEngine } from '../src/engine/engine.js'
import { readModel } from '../src/engine/model.js'
import { listCatalog } from '../src/storage/catalog.js'
import { listSubRoles } from '../src/storage/subRoles.js'
import type { Database } from '../src/storage/db.js'
import { migrate } from '../src/storage/migrate.js'
import { openPostgres } from '../src/storage/pg.js'
import { openPGlite } from '../src/storage/pglite.js'

export const postgresUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined
export const BENCH_SECRET = 'bench-secret-0123456789abcdef'
export const BENCH_EMAIL = 'clerk@m1.bench'

/** A store of its own: a fresh schema on PostgreSQL, or an in-memory PGlite. */
export async function benchDatabase(schema?: string): Promise<{ db: Database; schema: string | null; drop: () => Promise<void> }> {
  if (postgresUrl === undefined) {
    const db = await openPGlite(null)
    return { db, schema: null, drop: () => db.close() }
  }
  const name = schema ?? `bench_${randomBytes(4).toString('hex')}`
  const admin = openPostgres({ url: postgresUrl, max: 1 })
  if (schema === undefined) await admin.query(`CREATE SCHEMA ${name}`)
  const db = openPostgres({ url: postgresUrl, schema: name })
  return {
    db,
    schema: name,
    drop: async () => {
      await db.close()
      if (schema === undefined) await admin.query(`DROP SCHEMA ${name} CASCADE`)
      await admin.close()
    },
  }
}

/** The example route map of gateway/, so that the prefix form of forward auth has pairs to decide. */
export const BENCH_ROUTE_MAP = new URL('../gateway/routes.example.json', import.meta.url).pathname

/** The service's configuration for the bench; `logLevel` as in production (info) for the HTTP server. */
export function benchConfig(logLevel = 'silent') {
  return loadConfig({
    DATABASE_URL: postgresUrl ?? 'pglite://memory',
    JWT_SECRET: BENCH_SECRET,
    LOG_LEVEL: logLevel,
    ROUTE_MAP_PATH: BENCH_ROUTE_MAP,
    // An edited model for bench/editedHttp.ts's second server; else model.conf.
    ...(process.env.BENCH_MODEL_PATH !== undefined ? { MODEL_PATH: process.env.BENCH_MODEL_PATH } : {}),
    // The decision log as the bench's server process was started with (bench/run.ts's logged rows).
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('DECISION_LOG'))),
  })
}

/**
 * `rules` role grants over the catalog's pairs: 50 merchants × every
 * declared pair per sub-role (900 with today's 18 pairs), about 1% of them denies.
 */
export async function seedRules(db: Database, rules: number): Promise<void> {
  await migrate(db)
  const pairs = declaredCatalog()
  const objs = pairs.map((p) => p.obj)
  const acts = pairs.map((p) => p.act)
  const n = pairs.length
  await db.query(
    `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4)
     SELECT 'p', 'role_' || (i / ${50 * n}), 'm' || (i % 50), ($2::text[])[((i / 50) % ${n}) + 1], ($3::text[])[((i / 50) % ${n}) + 1],
            CASE WHEN i % 97 = 0 THEN 'deny' ELSE 'allow' END
     FROM generate_series(0, $1::int - 1) AS i`,
    [rules, objs, acts],
  )
}

/** A merchant user of m1 holding `role_0` (granted every catalog pair in m1, but 1% denies), and its token. */
export async function benchSubject(service: Service): Promise<{ userId: string; token: string }> {
  const owner = await onboardMerchant(service, SYSTEM_ACTOR, { merchant_id: 'm1', email: 'owner@m1.bench', password: 'bench-password', name: 'Owner' })
  const clerk = await registerAdmin(service, { account: owner, ip: null }, { email: BENCH_EMAIL, password: 'bench-password', name: 'Clerk', sub_role_code: 'role_0' })
  if (service.tokens === null) throw new Error('bench needs JWT_SECRET')
  return { userId: clerk.id, token: service.tokens.issue(clerk, 86400).access_token }
}

export async function benchService(db: Database, logLevel = 'silent'): Promise<Service> {
  return buildService(benchConfig(logLevel), { db, skipFirstAdmin: true })
}

/** The engine loaded on its own from `db`, how long that took, and the heap it added per stored row (p and g rows and overrides). */
export async function measuredEngine(db: Database): Promise<{ engine: PermissionEngine; loadMs: number; heapPerRule: number; rules: number }> {
  const model = readModel(new URL('../model.conf', import.meta.url).pathname)
  const state = { rootRoles: (await listSubRoles(db)).filter((r) => r.is_root).map((r) => r.code), catalog: await listCatalog(db) }
  gc?.()
  const before = process.memoryUsage().heapUsed
  const started = performance.now()
  const engine = await PermissionEngine.load(db, model.text, state)
  const loadMs = performance.now() - started
  gc?.()
  const used = process.memoryUsage().heapUsed - before
  const { rows } = await db.query<{ n: number }>('SELECT (SELECT count(*) FROM casbin_rule) + (SELECT count(*) FROM permission_overrides) AS n')
  const rules = Math.max(1, Number(rows[0]?.n ?? 1))
  // The engine is returned, so it is still alive when measured.
  return { engine, loadMs, heapPerRule: used / rules, rules }
}

/** The bench's check-batch body: 100 checks of the bench subject's merchant. */
export const BATCH = JSON.stringify({
  command: 'check-batch',
  data: { checks: Array.from({ length: 100 }, (_, i) => ({ obj: i % 2 === 0 ? 'orders' : 'payouts', act: i % 3 === 0 ? 'read' : 'approve', domain: 'm1' })) },
})
