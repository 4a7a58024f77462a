/**
 * A gRPC client built from the repository's .proto files with proto-loader,
 * as any client would be, against a gRPC server started on a free port for
 * one test's service.
 */
import { credentials, makeGenericClientConstructor, Metadata, type ChannelCredentials, type Client, type ServiceClientConstructor, type ServiceError } from '@grpc/grpc-js'
import { loadPackageDefinition } from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'
import { fileURLToPath } from 'node:url'
import { LOADER_OPTIONS, PROTO_FILES } from '../../src/grpc/protos.js'
import type { GrpcServer, GrpcServerOptions } from '../../src/grpc/server.js'
import { startGrpc } from '../../src/http/server.js'
import type { Service } from '../../src/compose.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

const packages = loadPackageDefinition(loadSync(PROTO_FILES, LOADER_OPTIONS))
// ext_authz's client sends more of Envoy's fields than the service declares (envoy_sent.proto).
const sent = loadPackageDefinition(
  loadSync('envoy_sent.proto', { ...LOADER_OPTIONS, includeDirs: [...(LOADER_OPTIONS.includeDirs ?? []), fileURLToPath(new URL('./proto/', import.meta.url))] }),
)

/** Envoy's client: the fuller request, on Envoy's method path. */
function envoyAuthorization(): ServiceClientConstructor {
  const { Check } = constructor('envoy.service.auth.v3.SentAuthorization', sent).service
  return makeGenericClientConstructor({ Check: { ...Check!, path: '/envoy.service.auth.v3.Authorization/Check' } }, 'Authorization')
}

function constructor(path: string, from = packages): ServiceClientConstructor {
  let node: unknown = from
  for (const part of path.split('.')) node = (node as Record<string, unknown>)[part]
  return node as ServiceClientConstructor
}

export interface Call<Res> {
  error: ServiceError | null
  response: Res | undefined
  /** Initial metadata (aps.authz.v1's x-decision-id, x-policy-revision). */
  headers: Metadata | undefined
}

/** One unary call, its error or answer (never a rejection). */
export function unary<Res>(client: Client, method: string, request: unknown, metadata = new Metadata()): Promise<Call<Res>> {
  return new Promise((resolve) => {
    let headers: Metadata | undefined
    const call = (client as unknown as Record<string, (...args: unknown[]) => { on(e: string, f: (m: Metadata) => void): void }>)[method]!.call(
      client,
      request,
      metadata,
      (error: ServiceError | null, response: Res | undefined) => resolve({ error, response, headers }),
    )
    call.on('metadata', (m) => (headers = m))
  })
}

export interface GrpcHarness {
  server: GrpcServer
  address: string
  extAuthz: Client
  authz: Client
  health: Client
}

/** Starts the gRPC server over a test's service (its route map, the HTTP routes' token rules) and clients for it. */
export async function startTestGrpc(t: Teardown, service: Service, options: Partial<GrpcServerOptions> = {}): Promise<GrpcHarness> {
  const server = await startGrpc({ ...service.config, host: '127.0.0.1', grpc: { port: 0, tls: null } }, service, options)
  if (server === null) throw new Error('unreachable: gRPC is configured above')
  t.teardown(() => server.stop(1000))
  return { server, ...grpcClients(t, `127.0.0.1:${server.port}`) }
}

export type GrpcClients = Omit<GrpcHarness, 'server'>

/** Clients of the three services at an address (a server in this process or another); cleartext unless `channel` says otherwise. */
export function grpcClients(t: Teardown, address: string, channel: ChannelCredentials = credentials.createInsecure()): GrpcClients {
  const client = (path: string | ServiceClientConstructor): Client => {
    const Ctor = typeof path === 'string' ? constructor(path) : path
    const c = new Ctor(address, channel)
    t.teardown(() => c.close())
    return c
  }
  return {
    address,
    extAuthz: client(envoyAuthorization()),
    authz: client('aps.authz.v1.Authz'),
    health: client('grpc.health.v1.Health'),
  }
}

/** The attributes Envoy fills for a request it holds: lower-cased headers (pseudo-headers too), the path with its query. */
export function envoyCheckRequest(method: string, path: string, headers: Record<string, string> = {}): unknown {
  return {
    attributes: {
      source: { principal: 'spiffe://cluster.local/ns/shop/sa/frontend', labels: { app: 'frontend' } },
      destination: { service: 'orders', principal: 'spiffe://cluster.local/ns/shop/sa/orders' },
      request: {
        time: { seconds: String(Math.floor(Date.now() / 1000)), nanos: 0 },
        http: {
          id: '4f1a6d2e-0c7b-4c1e-9a77-5b2f0e3d8c11',
          method,
          headers: { ':authority': 'shop.example', ':method': method, ':path': path, ':scheme': 'https', 'user-agent': 'curl/8.5.0', 'x-request-id': '4f1a6d2e-0c7b-4c1e-9a77-5b2f0e3d8c11', ...headers },
          path,
          host: 'shop.example',
          scheme: 'https',
          protocol: 'HTTP/1.1',
          size: '0',
          query: '',
        },
      },
      context_extensions: { virtual_host: 'shop' },
    },
  }
}
