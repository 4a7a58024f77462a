/**
 * What the security suite (test/security/) shares: the routes as the app
 * itself declares them, so a new route is covered without editing the tests,
 * and a cheap mark of every table a refused request must leave alone.
 */
import type { Service } from '../../src/compose.js'
import type { PermissionDeclaration } from '../../src/domain/permissions.js'
import type { PrincipalType } from '../../src/domain/principals.js'
import app from '../../src/http/app.js'
import { createFastify } from '../../src/http/fastifyOptions.js'
import type { Queryable } from '../../src/storage/db.js'
import { ARGON2_PARAMETERS, createPasswordHasher, type PasswordHasher } from '../../src/security/passwords.js'

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

/**
 * argon2id at its smallest cost: these suites register dozens of accounts
 * and the hash's strength is not what they test (its own tests and
 * docs/decisions.md cover it); at the production cost on a busy machine the accounts
 * alone took most of a file's minute.
 */
export function cheapPasswords(): PasswordHasher {
  // The parameters' type is the production constants' literal type: these are other numbers of the same meaning.
  return createPasswordHasher({ ...ARGON2_PARAMETERS, memoryCost: 1024, timeCost: 1 } as unknown as typeof ARGON2_PARAMETERS)
}

/**
 * The API's own routes and the console's files: the documentation UI's static
 * files are not the API's answers, and the bare `/console` only redirects
 * (302, no body) to `/console/`, which is kept.
 */
export const apiRoutes = (routes: readonly DeclaredRoute[]): DeclaredRoute[] =>
  routes.filter((r) => r.url !== '/docs' && !r.url.startsWith('/docs/') && r.url !== '/console')

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

/*
 * Per table, its row count and the newest transaction id among its row
 * versions (xmin). Every INSERT and UPDATE leaves a row version stamped with
 * a transaction id newer than any before it, and every DELETE that is not
 * paired with one lowers the count: so any committed change to a table moves
 * its mark, at the cost of a scan without reading the rows' contents (a
 * digest of every row's text costs three times as much, per request).
 */
const FINGERPRINT_SQL = GUARDED_TABLES.map(
  (table) => `SELECT '${table}' AS name, count(*)::text || ':' || coalesce(max(xmin::text::bigint), 0)::text AS mark FROM ${table}`,
).join(' UNION ALL ')

/** A mark per guarded table that moves with any committed insert, update or delete in it; one round trip. */
export async function fingerprint(db: Queryable): Promise<Fingerprint> {
  const { rows } = await db.query<{ name: (typeof GUARDED_TABLES)[number]; mark: string }>(FINGERPRINT_SQL)
  return Object.fromEntries(rows.map((r) => [r.name, r.mark])) as Fingerprint
}

/** The tables whose mark differs, empty when none does. */
export function changedTables(before: Fingerprint, after: Fingerprint): string[] {
  return GUARDED_TABLES.filter((table) => before[table] !== after[table])
}
