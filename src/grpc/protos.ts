import { fileURLToPath } from 'node:url'
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor, type ServiceDefinition } from '@grpc/grpc-js'
import { loadSync, type Options } from '@grpc/proto-loader'

/** The repository's proto/ folder, from src/grpc/ as from dist/grpc/. */
export const PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url))

/** The services the server offers, each file with what it imports. */
export const PROTO_FILES = ['envoy/service/auth/v3/external_auth.proto', 'aps/authz/v1/authz.proto', 'grpc/health/v1/health.proto']

/**
 * Field names as the .proto files spell them, absent fields left undefined
 * (no defaults filled in: an unset `path` is told from an empty one), enums
 * as numbers (HTTP statuses are their own numbers).
 */
export const LOADER_OPTIONS: Options = { keepCase: true, longs: String, enums: Number, defaults: false, oneofs: true, includeDirs: [PROTO_ROOT] }

export interface ServiceProtos {
  extAuthz: ServiceDefinition
  authz: ServiceDefinition
  health: ServiceDefinition
  /** The loaded packages, for clients (tests, the bench). */
  packages: GrpcObject
}

function service(packages: GrpcObject, path: string): ServiceDefinition {
  let node: unknown = packages
  for (const part of path.split('.')) node = (node as Record<string, unknown>)[part]
  return (node as ServiceClientConstructor).service
}

/** Reads the .proto files once. */
export function loadServiceProtos(): ServiceProtos {
  const packages = loadPackageDefinition(loadSync(PROTO_FILES, LOADER_OPTIONS))
  return {
    extAuthz: service(packages, 'envoy.service.auth.v3.Authorization'),
    authz: service(packages, 'aps.authz.v1.Authz'),
    health: service(packages, 'grpc.health.v1.Health'),
    packages,
  }
}
