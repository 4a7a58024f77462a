/**
 * What the security suite (test/security/) shares: the routes as the app
 * itself declares them, so a new route is covered without editing the tests,
 * and a cheap fingerprint of every table a refused request must leave alone.
 */
import type { Service } from '../../src/compose.js'
import type { PermissionDeclaration } from '../../src/domain/permissions.js'
import type { PrincipalType } from '../../src/domain/principals.js'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/server.js'
import type { Queryable } from '../../src/storage/db.js'

/** The part of a JSON schema the suite reads to build requests. */
export interface SchemaNode {
  type?: string | string[]
  const?: unknown
  pattern?: string
  properties?: Record<string, SchemaNode>
  required?: string[]
  items?: SchemaNode
}

export interface DeclaredRoute {
  method: string
  url: string
  public: boolean
  permission: PermissionDeclaration | undefined
  principalTypes: readonly PrincipalType[] | undefined
  params: SchemaNode | undefined
  querystring: SchemaNode | undefined
  body: SchemaNode | undefined
}

/**
 * Every route the API plugin declares, read from a throwaway instance built
 * on the same service (the instance under test was made before a hook could
 * be added to it). HEAD routes Fastify adds for each GET are included.
 */
export async function declaredRoutes(service: Service): Promise<DeclaredRoute[]> {
  const fastify = createFastify(service.config)
  const routes: DeclaredRoute[] = []
  fastify.addHook('onRoute', (route) => {
    const schema = (route.schema ?? {}) as { params?: SchemaNode; querystring?: SchemaNode; body?: SchemaNode }
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      routes.push({
        method: String(method),
        url: route.url ?? route.path,
        public: route.config?.public === true,
        permission: route.config?.permission,
        principalTypes: route.config?.principalTypes,
        params: schema.params,
        querystring: schema.querystring,
        body: schema.body,
      })
    }
  })
  await fastify.register(app, { service })
  await fastify.ready()
  await fastify.close()
  return routes
}

/** The API's own routes: the documentation UI's static files are not part of the contract. */
export const apiRoutes = (routes: readonly DeclaredRoute[]): DeclaredRoute[] =>
  routes.filter((r) => r.url !== '/docs' && !r.url.startsWith('/docs/'))

/** Tables whose rows only a successful command may change. */
export const GUARDED_TABLES = [
  'admin_accounts',
  'merchants',
  'sub_roles',
  'casbin_rule',
  'permission_overrides',
  'permission_catalog',
  'permission_audit',
  'store_revision',
  'store_changes',
] as const

export type Fingerprint = Record<(typeof GUARDED_TABLES)[number], string>

const FINGERPRINT_SQL = GUARDED_TABLES.map(
  (table) =>
    `SELECT '${table}' AS name, count(*)::text || ':' || md5(coalesce(string_agg(r::text, E'\\n' ORDER BY r::text), '')) AS digest FROM ${table} r`,
).join(' UNION ALL ')

/** Row count and a digest of every row's full text, per guarded table, in one round trip. */
export async function fingerprint(db: Queryable): Promise<Fingerprint> {
  const { rows } = await db.query<{ name: (typeof GUARDED_TABLES)[number]; digest: string }>(FINGERPRINT_SQL)
  return Object.fromEntries(rows.map((r) => [r.name, r.digest])) as Fingerprint
}

/** The tables whose digest differs, empty when none does. */
export function changedTables(before: Fingerprint, after: Fingerprint): string[] {
  return GUARDED_TABLES.filter((table) => before[table] !== after[table])
}

/** Every row of every guarded table as text, for a readable difference when a fingerprint moves. */
export async function snapshotTables(db: Queryable): Promise<Record<string, string[]>> {
  const result: Record<string, string[]> = {}
  for (const table of GUARDED_TABLES) {
    result[table] = (await db.query<{ row: string }>(`SELECT r::text AS row FROM ${table} r ORDER BY r::text`)).rows.map((r) => r.row)
  }
  return result
}

/** Rows added and removed between two snapshots, per table that changed. */
export function snapshotDifference(before: Record<string, string[]>, after: Record<string, string[]>): Record<string, { added: string[]; removed: string[] }> {
  const difference: Record<string, { added: string[]; removed: string[] }> = {}
  for (const table of GUARDED_TABLES) {
    const a = new Set(before[table] ?? [])
    const b = new Set(after[table] ?? [])
    const added = [...b].filter((row) => !a.has(row))
    const removed = [...a].filter((row) => !b.has(row))
    if (added.length > 0 || removed.length > 0) difference[table] = { added, removed }
  }
  return difference
}
