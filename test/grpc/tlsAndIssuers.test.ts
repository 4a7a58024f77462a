/**
 * gRPC over TLS (GRPC_TLS_CERT/GRPC_TLS_KEY: a self-signed certificate made
 * here with openssl) and with tokens from an external issuer
 * (JWT_PUBLIC_KEY, JWT_JWKS_URL), as HTTP takes them: accepted when signed
 * by the issuer's key, refused UNAUTHENTICATED otherwise, on aps.authz.v1
 * and on ext_authz.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { credentials, Metadata, status } from '@grpc/grpc-js'
import { startGrpc } from '../../src/http/server.js'
import type { Account } from '../../src/domain/principals.js'
import { buildTestService, tempDir } from '../helper.js'
import { envoyCheckRequest, grpcClients, startTestGrpc, unary, type GrpcClients } from '../support/grpcClient.js'
import { keyPair, nowSeconds, serveJwks, sign } from '../support/jwt.js'
import { TEST_SECRET } from '../helper.js'

const bearer = (token: string): Metadata => {
  const m = new Metadata()
  m.set('authorization', `Bearer ${token}`)
  return m
}

interface EnvoyAnswer {
  status: { code?: number }
  denied_response?: { status: { code: number } }
}

/** A self-signed certificate for 127.0.0.1 and localhost, and its key, in `dir`. */
function selfSigned(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`)
  const key = join(dir, `${name}.key`)
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' })
  return { cert, key }
}

const rootOf = async (service: Awaited<ReturnType<typeof buildTestService>>): Promise<Account> => {
  const { rows } = await service.db.query<{ id: string }>("SELECT id::text AS id FROM admin_accounts WHERE sub_role_code = 'super_admin' LIMIT 1")
  const root = await service.accounts.get(rows[0]?.id ?? '')
  if (root === null) throw new Error('bootstrap did not create the root admin')
  return root
}

t.test('GRPC_TLS_CERT/GRPC_TLS_KEY: served over TLS, refused in cleartext and to a client that does not trust the certificate', async (t) => {
  const dir = tempDir(t)
  const { cert, key } = selfSigned(dir, 'server')
  const service = await buildTestService(t, { env: { GRPC_PORT: '0', GRPC_TLS_CERT: cert, GRPC_TLS_KEY: key } })
  t.same(service.config.grpc?.tls, { certPath: cert, keyPath: key }, 'the settings read')
  const server = await startGrpc({ ...service.config, host: '127.0.0.1' }, service)
  if (server === null) throw new Error('unreachable: GRPC_PORT is set')
  t.teardown(() => server.stop(1000))
  const address = `127.0.0.1:${server.port}`
  const root = await rootOf(service)
  const token = service.tokens?.issue(root).access_token ?? ''

  const tls = grpcClients(t, address, credentials.createSsl(readFileSync(cert)))
  const allowed = await unary<{ allowed?: boolean; decision_id?: string }>(tls.authz, 'Check', { obj: 'orders', act: 'read' }, bearer(token))
  t.equal(allowed.error, null, 'a client trusting the certificate is answered')
  t.equal(allowed.response?.allowed, true)
  t.ok(allowed.response?.decision_id, 'with its decision id')
  const health = await unary<{ status: number }>(tls.health, 'Check', { service: '' })
  t.equal(health.response?.status, 1, 'health over TLS: SERVING')
  const envoy = await unary<EnvoyAnswer>(tls.extAuthz, 'Check', envoyCheckRequest('GET', '/nowhere', { authorization: `Bearer ${token}` }))
  t.equal(envoy.error, null, 'ext_authz over TLS answers')
  t.equal(envoy.response?.status.code, status.PERMISSION_DENIED, 'an unmapped path is denied (no route map here)')

  const clear = grpcClients(t, address)
  const cleartext = await unary(clear.authz, 'Check', { obj: 'orders', act: 'read' }, bearer(token))
  t.equal(cleartext.error?.code, status.UNAVAILABLE, 'a cleartext (h2c) client gets no answer')
  const other = selfSigned(dir, 'other')
  const untrusting = grpcClients(t, address, credentials.createSsl(readFileSync(other.cert)))
  const refused = await unary(untrusting.authz, 'Check', { obj: 'orders', act: 'read' }, bearer(token))
  t.equal(refused.error?.code, status.UNAVAILABLE, 'a client trusting another certificate does not connect')
})

/** Asks both gRPC services with `token`: aps.authz.v1 Check's status, ext_authz's status. */
async function askBoth(clients: GrpcClients, token: string): Promise<[number, number]> {
  const check = await unary<{ allowed?: boolean }>(clients.authz, 'Check', { obj: 'orders', act: 'read' }, bearer(token))
  const envoy = await unary<EnvoyAnswer>(clients.extAuthz, 'Check', envoyCheckRequest('GET', '/nowhere', { authorization: `Bearer ${token}` }))
  // ext_authz: no route map here, so an admitted caller is denied the unmapped path (PERMISSION_DENIED), a refused one is UNAUTHENTICATED.
  return [check.error?.code ?? (check.response?.allowed === true ? status.OK : -1), envoy.response?.status.code ?? -1]
}

const claimsOf = (account: Account, extra: Record<string, unknown> = {}) => ({
  sub: account.id,
  principal_type: account.principal_type,
  ...(account.merchant_id !== null ? { merchant_id: account.merchant_id } : {}),
  iat: nowSeconds(),
  exp: nowSeconds() + 300,
  ...extra,
})

t.test('an external issuer: JWT_PUBLIC_KEY and JWT_JWKS_URL tokens accepted over gRPC, others refused UNAUTHENTICATED', async (t) => {
  const keys = keyPair('rsa')
  const jwksKeys = keyPair('ec')
  const jwks = await serveJwks(t, [{ key: jwksKeys.publicKey, kid: 'ec-1', alg: 'ES256' }])
  for (const [name, env, good, wrongKey] of [
    ['JWT_PUBLIC_KEY', { JWT_SECRET: undefined, JWT_PUBLIC_KEY: keys.publicPem }, (c: object) => sign({ ...c }, keys.privatePem, 'RS256'), (c: object) => sign({ ...c }, keyPair('rsa').privatePem, 'RS256')],
    ['JWT_JWKS_URL', { JWT_SECRET: undefined, JWT_JWKS_URL: jwks.url }, (c: object) => sign({ ...c }, jwksKeys.privatePem, 'ES256', 'ec-1'), (c: object) => sign({ ...c }, keyPair('ec').privatePem, 'ES256', 'ec-1')],
  ] as const) {
    await t.test(name, async (t) => {
      const service = await buildTestService(t, { env })
      t.equal(service.tokens, null, 'the service issues no tokens of its own')
      const root = await rootOf(service)
      const grpc = await startTestGrpc(t, service)
      t.same(await askBoth(grpc, good(claimsOf(root))), [status.OK, status.PERMISSION_DENIED], "the issuer's token admits the caller on both services")
      t.same(await askBoth(grpc, wrongKey(claimsOf(root))), [status.UNAUTHENTICATED, status.UNAUTHENTICATED], 'signed by another key')
      t.same(await askBoth(grpc, sign(claimsOf(root), TEST_SECRET, 'HS256')), [status.UNAUTHENTICATED, status.UNAUTHENTICATED], 'a shared-secret token')
      t.same(await askBoth(grpc, good(claimsOf(root, { exp: nowSeconds() - 30 }))), [status.UNAUTHENTICATED, status.UNAUTHENTICATED], 'expired')
      t.same(await askBoth(grpc, good(claimsOf(root, { merchant_id: 'm1' }))), [status.UNAUTHENTICATED, status.UNAUTHENTICATED], 'claims that disagree with the account')
    })
  }
  t.ok(jwks.fetches() >= 1, 'the key set was fetched')
})
