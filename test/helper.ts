import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildService, type BuildOptions, type Service } from '../src/compose.js'
import type { Config } from '../src/config.js'
import { loadConfig } from '../src/startup.js'
import type { Database } from '../src/storage/db.js'
import { openPostgres } from '../src/storage/pg.js'
import { openPGlite } from '../src/storage/pglite.js'
import app from '../src/http/app.js'
import { createFastify } from '../src/http/fastifyOptions.js'
import type { Account } from '../src/domain/principals.js'
import { emptyPGliteDataDirFile, migratedPGliteDataDirFile } from './support/pgliteTemplate.js'

/** The back end every test file runs on: PostgreSQL when DATABASE_URL says so, else an in-memory PGlite. */
export const postgresUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined
export const backend: 'postgres' | 'pglite' = postgresUrl !== undefined ? 'postgres' : 'pglite'

/**
 * Every PGlite store the service opens during the tests (in this process, and
 * in the server and command-line processes that inherit or are given this
 * variable) starts from one initdb made per checkout instead of its own:
 * the test-only hook of `openPGlite`, docs/testing.md.
 */
const emptyStoreFile = await emptyPGliteDataDirFile()
process.env.APS_TEST_PGLITE_INITDB = emptyStoreFile

interface Teardown {
  teardown(fn: () => unknown): void
}

export const TEST_SECRET = 'test-secret-that-is-long-enough-0123456789'
export const ROOT_EMAIL = 'root@example.com'
export const ROOT_PASSWORD = 'root-password-123'

/** A temporary folder, removed when the test ends. */
export function tempDir(t: Teardown, prefix = 'aps-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/**
 * A database of its own for one test file: a fresh schema on PostgreSQL, a
 * fresh in-memory PGlite otherwise. Empty, unless `migrated` asks for one
 * with the migrations already applied, which only a PGlite store can start
 * from (test/support/pgliteTemplate.ts); on PostgreSQL it is empty either way
 * and the service migrates it.
 */
export async function freshDatabase(t: Teardown, options: { migrated?: boolean } = {}): Promise<Database & { schema?: string }> {
  if (postgresUrl === undefined) {
    // openPGlite reads the variable when called, before it awaits anything.
    if (options.migrated === true) process.env.APS_TEST_PGLITE_INITDB = await migratedPGliteDataDirFile()
    const opening = openPGlite(null)
    process.env.APS_TEST_PGLITE_INITDB = emptyStoreFile
    const db = await opening
    t.teardown(() => db.close())
    return db
  }
  const schema = `test_${randomBytes(6).toString('hex')}`
  const admin = openPostgres({ url: postgresUrl, max: 1 })
  await admin.query(`CREATE SCHEMA ${schema}`)
  const db = Object.assign(openPostgres({ url: postgresUrl, schema }), { schema })
  t.teardown(async () => {
    await db.close()
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.close()
  })
  return db
}

/** A second connection to the same database (PostgreSQL only), e.g. to play a second replica. */
export function secondConnection(t: Teardown, db: { schema?: string }): Database {
  if (postgresUrl === undefined || db.schema === undefined) throw new Error('a second connection needs PostgreSQL')
  const other = openPostgres({ url: postgresUrl, schema: db.schema })
  t.teardown(() => other.close())
  return other
}

export function testConfig(env: Record<string, string | undefined> = {}): Config {
  return loadConfig({
    DATABASE_URL: postgresUrl ?? 'pglite://memory',
    JWT_SECRET: TEST_SECRET,
    LOG_LEVEL: 'silent',
    LOGIN_RATE_LIMIT_PER_MINUTE: '10000',
    // Tests that count login failures per account set their own limit.
    LOGIN_ACCOUNT_FAILURES: '1000',
    // Routes called in turn with app.inject (the matrix, the fuzz) wait for a change stream's end.
    CHANGE_STREAM_MAX_MS: '50',
    BOOTSTRAP_ADMIN_EMAIL: ROOT_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: ROOT_PASSWORD,
    ...env,
  })
}

export async function buildTestService(
  t: Teardown,
  options: { env?: Record<string, string | undefined>; db?: Database } & Omit<BuildOptions, 'db'> = {},
): Promise<Service> {
  const db = options.db ?? (await freshDatabase(t, { migrated: true }))
  const service = await buildService(testConfig(options.env), { skipFirstAdmin: true, ...options, db })
  // Its change-feed listener and poll would otherwise outlive the test.
  t.teardown(() => service.close())
  return service
}

export interface TestApp {
  app: FastifyInstance
  service: Service
  /** The system-owner super_admin made by bootstrap. */
  root: Account
  rootToken: string
  tokenFor(account: Pick<Account, 'id' | 'principal_type' | 'merchant_id'>): string
  /** `app.inject` with a bearer token and JSON body; `token: null` sends none. */
  call(options: CallOptions): Promise<LightMyRequestResponse>
}

export interface CallOptions {
  method: 'GET' | 'POST' | 'DELETE' | 'PUT' | 'PATCH'
  url: string
  token?: string | null
  body?: unknown
  headers?: Record<string, string>
  /** The socket's peer address (default 127.0.0.1). */
  remoteAddress?: string
}

export async function buildTestApp(
  t: Teardown,
  options: { env?: Record<string, string | undefined>; db?: Database; service?: Service } & Pick<BuildOptions, 'clock'> = {},
): Promise<TestApp> {
  const service = options.service ?? (await buildTestService(t, options))
  // The runner's own Fastify options (body limit, proxy trust, request ids), as in production.
  const fastify = createFastify(service.config)
  await fastify.register(app, { service })
  await fastify.ready()
  t.teardown(() => fastify.close())
  const root = await service.accounts.get(
    (await service.db.query<{ id: string }>('SELECT id::text AS id FROM admin_accounts WHERE lower(email) = lower($1)', [ROOT_EMAIL])).rows[0]?.id ?? '',
  )
  if (root === null) throw new Error('bootstrap did not create the root admin')
  const tokenFor: TestApp['tokenFor'] = (account) => {
    if (service.tokens === null) throw new Error('tokens need JWT_SECRET')
    return service.tokens.issue(account).access_token
  }
  // With an external issuer (public key, JWKS) the service issues no tokens.
  const rootToken = service.tokens !== null ? tokenFor(root) : ''
  return {
    app: fastify,
    service,
    root,
    rootToken,
    tokenFor,
    call({ method, url, token = rootToken, body, headers = {}, remoteAddress }) {
      return fastify.inject({
        method,
        url,
        ...(remoteAddress !== undefined ? { remoteAddress } : {}),
        headers: {
          ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      })
    },
  }
}

/** Onboards a merchant as root and returns its super_admin. */
export async function onboard(ta: TestApp, merchantId: string, email = `owner@${merchantId}.example`): Promise<Account> {
  const res = await ta.call({
    method: 'POST',
    url: '/v2/admin/merchants',
    body: { command: 'onboard-merchant', data: { merchant_id: merchantId, email, password: 'merchant-pass-1', name: `Owner ${merchantId}` } },
  })
  if (res.statusCode !== 201) throw new Error(`onboard failed: ${res.statusCode} ${res.body}`)
  return (res.json() as { data: Account }).data
}

/** Registers an admin as `token`'s owner and returns it. */
export async function register(
  ta: TestApp,
  data: { email: string; sub_role_code: string; merchant_id?: string; password?: string; name?: string },
  token = ta.rootToken,
): Promise<Account> {
  const res = await ta.call({
    method: 'POST',
    url: '/v2/admin/register',
    token,
    body: { command: 'register-admin', data: { password: 'admin-pass-123', name: data.email, ...data } },
  })
  if (res.statusCode !== 201) throw new Error(`register failed: ${res.statusCode} ${res.body}`)
  return (res.json() as { data: Account }).data
}
