/**
 * gRPC served by the runner (GRPC_PORT) in two server processes over one
 * PostgreSQL: a revoke committed through replica A refuses ext_authz and
 * aps.authz.v1 checks on replica B, which had allowed them, and the runner
 * stops its gRPC server with the rest (exit code 0).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { status } from '@grpc/grpc-js'
import { Metadata } from '@grpc/grpc-js'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, backend, tempDir } from '../helper.js'
import { EVENTUALLY_MS } from '../support/eventually.js'
import { envoyCheckRequest, grpcClients, unary } from '../support/grpcClient.js'
import { freePort, processDatabase, startServer, type ServerProcess } from '../support/serverProcess.js'

const skip = backend === 'postgres' ? false : 'several replicas need PostgreSQL (DATABASE_URL=postgres://…)'

async function http(server: ServerProcess, method: string, path: string, token: string | null, body?: unknown): Promise<{ status: number; data: Record<string, unknown> }> {
  const res = await fetch(`${server.base}${path}`, {
    method,
    headers: { ...(token !== null ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const json = (await res.json()) as { data?: Record<string, unknown> }
  return { status: res.status, data: json.data ?? {} }
}

t.test('a revoke through one replica is refused over gRPC on another', { skip }, async (t) => {
  const pdb = await processDatabase(t)
  const routes = join(tempDir(t), 'routes.json')
  writeFileSync(routes, JSON.stringify([{ method: 'GET', path: '/orders/:id', obj: 'orders', act: 'read' }]))
  const env = async (): Promise<Record<string, string>> => ({
    DATABASE_URL: pdb.url,
    JWT_SECRET: TEST_SECRET,
    BOOTSTRAP_ADMIN_EMAIL: ROOT_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: ROOT_PASSWORD,
    ROUTE_MAP_PATH: routes,
    GRPC_PORT: String(await freePort()),
    REVISION_POLL_MS: '60000',
    LOG_LEVEL: 'warn',
  })
  const aEnv = await env()
  const a = await startServer(t, { name: 'A', env: aEnv })
  const bEnv = await env()
  const b = await startServer(t, { name: 'B', env: bEnv })
  const login = await http(a, 'POST', '/v2/auth/login', null, { command: 'login', data: { email: ROOT_EMAIL, password: ROOT_PASSWORD } })
  const root = login.data.access_token as string
  t.equal((await http(a, 'POST', '/v2/admin/merchants', root, { command: 'onboard-merchant', data: { merchant_id: 'm1', email: 'owner@m1.example', password: 'Passw0rd!long', name: 'Owner' } })).status, 201)
  const clerk = await http(a, 'POST', '/v2/admin/register', root, {
    command: 'register-admin',
    data: { email: 'clerk@m1.example', password: 'Passw0rd!long', name: 'Clerk', sub_role_code: 'clerk', merchant_id: 'm1' },
  })
  t.equal(clerk.status, 201)
  const grant = await http(a, 'POST', '/v2/admin/permissions/roles/clerk/grant', root, { command: 'grant-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } })
  t.equal(grant.status, 200)
  const clerkLogin = await http(a, 'POST', '/v2/auth/login', null, { command: 'login', data: { email: 'clerk@m1.example', password: 'Passw0rd!long' } })
  const token = clerkLogin.data.access_token as string

  const onB = grpcClients(t, `127.0.0.1:${bEnv.GRPC_PORT}`)
  const metadata = new Metadata()
  metadata.set('authorization', `Bearer ${token}`)
  const extAuthz = async () => (await unary<{ status: { code?: number } }>(onB.extAuthz, 'Check', envoyCheckRequest('GET', '/orders/9', { authorization: `Bearer ${token}` }))).response?.status.code ?? 0
  const check = async () => (await unary<{ allowed?: boolean }>(onB.authz, 'Check', { obj: 'orders', act: 'read' }, metadata)).response?.allowed ?? false
  const until = async (condition: () => Promise<boolean>): Promise<boolean> => {
    const end = Date.now() + EVENTUALLY_MS
    while (Date.now() < end) {
      if (await condition()) return true
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return false
  }
  t.ok(await until(async () => (await extAuthz()) === status.OK && (await check())), 'B allows once it has the grant')

  const revoke = await http(a, 'DELETE', '/v2/admin/permissions/roles/clerk/revoke', root, { command: 'revoke-role-permission', data: { obj: 'orders', act: 'read', domain: 'm1' } })
  t.equal(revoke.status, 200)
  t.ok(await until(async () => (await extAuthz()) === status.PERMISSION_DENIED && !(await check())), 'B refuses after the revoke through A')
  t.equal(await extAuthz(), status.PERMISSION_DENIED, 'and keeps refusing')

  const health = await unary<{ status?: number }>(onB.health, 'Check', { service: '' })
  t.equal(health.response?.status, 1, 'B: SERVING')
  const stopped = await b.stop('SIGTERM')
  t.equal(stopped.code, 0, 'B stops cleanly, gRPC included')
  t.ok(a.running())
})
