import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { parseAddressList, parseProxyTrust, type ProxyTrust } from './domain/clientIp.js'
import { DOMAIN_PATTERN, PERMISSION_PART_PATTERN } from './domain/identifiers.js'
import type { RouteMapEntry } from './domain/routeMap.js'
import { WHOLE_ADDRESS, parseAddressPrefix } from './domain/addressPrefix.js'
import type { DecisionLogConfig, DecisionSinkSpec } from './domain/decisionLogSettings.js'

/*
 * Reading the configuration is pure: it checks the environment and creates,
 * writes and reads no file. What needs a file (the data folder and the
 * generated token key in it, the route map) is start-up's: src/startup.ts
 * turns these Settings into the Config the service runs with.
 */

/** pino's levels, most verbose last but one; `silent` logs nothing. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/** The environment the service reads; nothing else reads process.env. */
const EnvSchema = Type.Object({
  DATABASE_URL: Type.Optional(Type.String({ minLength: 1 })),
  HOST: Type.String({ default: '0.0.0.0' }),
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000 }),
  JWT_SECRET: Type.Optional(Type.String({ minLength: 16 })),
  JWT_PUBLIC_KEY: Type.Optional(Type.String({ minLength: 1 })),
  JWT_JWKS_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  JWT_ISSUER: Type.Optional(Type.String({ minLength: 1 })),
  JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  JWT_TTL_SECONDS: Type.Integer({ minimum: 60, maximum: 86400 * 7, default: 3600 }),
  BOOTSTRAP_ADMIN_EMAIL: Type.Optional(Type.String({ minLength: 3 })),
  BOOTSTRAP_ADMIN_PASSWORD: Type.Optional(Type.String({ minLength: 8 })),
  DEFAULT_LOCALE: Type.String({ default: 'en', pattern: '^[a-z]{2}(-[A-Za-z]{2})?$' }),
  MODEL_PATH: Type.Optional(Type.String({ minLength: 1 })),
  MODEL_DECISIONS_PATH: Type.Optional(Type.String({ minLength: 1 })),
  ALLOW_FAILING_MODEL_DECISIONS: Type.Union([Type.Literal('true'), Type.Literal('false')], { default: 'false' }),
  TRUST_PROXY: Type.Optional(Type.String()),
  LOG_LEVEL: Type.Union(
    LOG_LEVELS.map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  CHECK_LOG_LEVEL: Type.Optional(Type.Union(LOG_LEVELS.map((l) => Type.Literal(l)))),
  LOGIN_RATE_LIMIT_PER_MINUTE: Type.Integer({ minimum: 1, default: 20 }),
  LOGIN_ACCOUNT_FAILURES: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  REVISION_POLL_MS: Type.Integer({ minimum: 50, maximum: 600_000, default: 5000 }),
  MIN_REVISION_WAIT_MS: Type.Integer({ minimum: 0, maximum: 60_000, default: 1000 }),
  MAX_STALENESS_MS: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 30_000 }),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 10_000 }),
  DB_CONNECT_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 3000 }),
  DB_STATEMENT_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 5000 }),
  DB_POOL_MAX: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  DB_STARTUP_TIMEOUT_MS: Type.Integer({ minimum: 0, maximum: 3_600_000, default: 60_000 }),
  ROUTE_MAP_PATH: Type.Optional(Type.String({ minLength: 1 })),
  METRICS_TOKEN: Type.Optional(Type.String({ minLength: 16 })),
  CORS_ORIGINS: Type.Optional(Type.String({ minLength: 1 })),
  SUB_ROLES_EXPLICIT: Type.Union([Type.Literal('true'), Type.Literal('false')], { default: 'false' }),
  REQUEST_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 30_000 }),
  MAX_CONNECTIONS_PER_ADDRESS: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 256 }),
  CONNECTION_LIMIT_EXEMPT: Type.String({ minLength: 1, default: 'loopback' }),
  CHANGE_RETENTION_DAYS: Type.Integer({ minimum: 0, maximum: 3650, default: 7 }),
  CHANGE_STREAM_HEARTBEAT_MS: Type.Integer({ minimum: 10, maximum: 3_600_000, default: 15_000 }),
  CHANGE_STREAM_MAX_MS: Type.Integer({ minimum: 10, maximum: 86_400_000, default: 3_600_000 }),
  CHANGE_STREAM_BUFFER_BYTES: Type.Integer({ minimum: 1024, maximum: 1_073_741_824, default: 1_048_576 }),
  CHANGE_STREAMS_PER_ADDRESS: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 64 }),
  GRPC_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
  GRPC_TLS_CERT: Type.Optional(Type.String({ minLength: 1 })),
  GRPC_TLS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  // Decision logs (CONTRACT 15): what is logged, where to, and how much each sink may hold back.
  DECISION_LOG: Type.Union([Type.Literal('off'), Type.Literal('denies'), Type.Literal('all')], { default: 'denies' }),
  DECISION_LOG_ALLOW_SAMPLE: Type.Number({ minimum: 0, maximum: 1, default: 1 }),
  DECISION_LOG_SINKS: Type.String({ default: '' }),
  DECISION_LOG_QUERY: Type.Union([Type.Literal('true'), Type.Literal('false')], { default: 'false' }),
  DECISION_LOG_CLIENT_IP_PREFIX: Type.Optional(Type.String({ minLength: 1 })),
  DECISION_LOG_BUFFER_EVENTS: Type.Integer({ minimum: 1, maximum: 10_000_000, default: 10_000 }),
  DECISION_LOG_BATCH_EVENTS: Type.Integer({ minimum: 1, maximum: 100_000, default: 500 }),
  DECISION_LOG_BATCH_BYTES: Type.Integer({ minimum: 1024, maximum: 64 * 1024 * 1024, default: 1024 * 1024 }),
  DECISION_LOG_BATCH_MS: Type.Integer({ minimum: 0, maximum: 60_000, default: 1000 }),
  DECISION_LOG_SINK_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 10_000 }),
  DECISION_LOG_FILE_MAX_BYTES: Type.Integer({ minimum: 1024, maximum: 2 ** 40, default: 100 * 1024 * 1024 }),
  DECISION_LOG_FILE_MAX_FILES: Type.Integer({ minimum: 1, maximum: 1000, default: 5 }),
  DECISION_LOG_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 3650, default: 7 }),
  SHADOW_MODEL_PATH: Type.Optional(Type.String({ minLength: 1 })),
  // A fraction written out (`0.25`, `.5`, `1`): a number schema would take `true` as 1.
  SHADOW_SAMPLE: Type.String({ pattern: '^(0(\\.[0-9]+)?|\\.[0-9]+|1(\\.0+)?)$', default: '1' }),
})

/** One entry of the forward-auth route map file (a JSON array of these). */
export const RouteMapEntrySchema = Type.Object(
  {
    method: Type.String({ pattern: '^([A-Za-z]+|\\*)$' }),
    path: Type.String({ pattern: '^/', maxLength: 2000 }),
    obj: Type.String({ pattern: PERMISSION_PART_PATTERN }),
    act: Type.String({ pattern: PERMISSION_PART_PATTERN }),
    domain: Type.Optional(Type.String({ pattern: `(${DOMAIN_PATTERN})|(^:[A-Za-z0-9_]+$)` })),
  },
  { additionalProperties: false },
)
type Env = Static<typeof EnvSchema>

export type StorageConfig =
  | { kind: 'postgres'; url: string }
  | { kind: 'pglite'; dataDir: string | null }

export type JwtConfig =
  | { mode: 'secret'; secret: string; generated: boolean }
  | { mode: 'public-key'; publicKey: string }
  | { mode: 'jwks'; jwksUrl: string }

/**
 * No key configured: start-up generates an HS256 secret, kept in `file` (the
 * embedded store's data folder) so tokens survive restarts, or with `file`
 * null (an in-memory store) a fresh one per process.
 */
export interface GeneratedKey {
  mode: 'generated'
  file: string | null
}

export interface Config {
  storage: StorageConfig
  host: string
  port: number
  jwt: JwtConfig
  jwtIssuer: string | undefined
  jwtAudience: string | undefined
  tokenTtlSeconds: number
  bootstrapAdmin: { email: string; password: string } | null
  defaultLocale: string
  modelPath: string
  /**
   * The decisions the model must give before the service starts
   * (MODEL_DECISIONS_PATH, else model.decisions beside the model).
   * `explicit`: named by MODEL_DECISIONS_PATH, so a missing file refuses the start.
   * `allowFailing` (ALLOW_FAILING_MODEL_DECISIONS=true) starts anyway, logged as an error.
   */
  modelDecisions: { path: string; explicit: boolean; allowFailing: boolean }
  /** Whose X-Forwarded-For is believed: the client is the rightmost address no trusted proxy wrote. */
  trustProxy: ProxyTrust
  logLevel: LogLevel
  /** Level of the check routes' request logs: the gateway calls them thousands of times a second. */
  checkLogLevel: LogLevel
  loginRateLimitPerMinute: number
  /** Failed logins per account within 15 minutes before that account's login answers 429 (counted in the database). */
  loginAccountFailures: number
  /** How replicas stay in step over one PostgreSQL: a change committed through one is applied by the others from the change feed. */
  replication: {
    /** The reconciling poll of the store's revision. */
    pollMs: number
    /** How long a read with `min_revision` waits for this replica to catch up before 503 `902`. */
    minRevisionWaitMs: number
    /** Past this long without confirming the revision against the database, checks fail closed (503 `903`). */
    maxStalenessMs: number
  }
  /** Bounded waits on the database: a partition costs a 503 quickly, never a hung request. */
  database: {
    connectTimeoutMs: number
    statementTimeoutMs: number
    poolMax: number
    /** How long start-up keeps retrying an unreachable database. */
    startupTimeoutMs: number
  }
  /** SIGTERM: past this, the process exits whatever clients do. */
  shutdownTimeoutMs: number
  /** The forward-auth route map (ROUTE_MAP_PATH), checked at start-up; null when none is configured. */
  routeMap: RouteMapEntry[] | null
  /** When set, GET /metrics answers only to `Authorization: Bearer <token>`. */
  metricsToken: string | undefined
  /** Browser origins allowed to call /v2 (CORS); empty: CORS off. */
  corsOrigins: string[]
  /** SUB_ROLES_EXPLICIT=true: a sub-role must be created (create-sub-role) in the domain, or in `global`, before it is granted or assigned there. */
  subRolesExplicit: boolean
  /** What one client may hold of the HTTP server. */
  connections: {
    /** A request, headers and body, must have arrived within this long (408 `604` after). */
    requestTimeoutMs: number
    /** Connections one client address may hold open at once; 0: no cap. */
    maxPerAddress: number
    /**
     * Addresses and ranges the cap does not count (by default the loopback: a
     * sidecar gateway's keep-alive pool), as TRUST_PROXY's list is read.
     */
    exempt: string[]
  }
  /** The change stream (GET /v2/admin/changes and its Server-Sent Events). */
  changeStream: {
    /** CHANGE_RETENTION_DAYS: how long a change stays listed; 0 keeps nothing older than the current revision. */
    retentionDays: number
    /** A comment line this often keeps proxies from closing an idle stream. */
    heartbeatMs: number
    /** A stream ends after this long; the client resumes with Last-Event-ID (and load spreads over replicas again). */
    maxMs: number
    /** A client that leaves more than this unread is disconnected, never buffered without limit. */
    bufferBytes: number
    /** Streams one client address may hold open at once (429 `608` past it). */
    perAddress: number
  }
  /** The gRPC server (GRPC_PORT): Envoy's ext_authz, aps.authz.v1 and health; null when off. */
  grpc: GrpcConfig | null
  /** Gateway decisions recorded after their answer (CONTRACT 15). */
  decisionLog: DecisionLogConfig
  /** SHADOW_MODEL_PATH, as start-up read it; null when no shadow model is configured. */
  shadowModel: ShadowModelConfig | null
}

export interface GrpcConfig {
  port: number
  /** GRPC_TLS_CERT and GRPC_TLS_KEY, PEM files read when the server starts; null: cleartext HTTP/2. */
  tls: { certPath: string; keyPath: string } | null
}

/** SHADOW_MODEL_PATH and SHADOW_SAMPLE: a second model asked every gateway decision (or the sample's share) after the answer. */
export interface ShadowSettings {
  path: string
  /** The share of decisions also asked of the shadow, 0 to 1. */
  sample: number
}

/** The shadow model's file as start-up read it: its text, or why it could not be read (the service then starts without a shadow). */
export type ShadowModelConfig = ShadowSettings & ({ text: string } | { unreadable: string })

/** The configuration as the environment gives it, before start-up reads and makes its files (src/startup.ts). */
export type Settings = Omit<Config, 'jwt' | 'routeMap' | 'shadowModel'> & {
  jwt: JwtConfig | GeneratedKey
  /** ROUTE_MAP_PATH: the file start-up reads the route map from; null when none is configured. */
  routeMapPath: string | null
  /** SHADOW_MODEL_PATH: the file start-up reads the shadow model from; null when none is configured. */
  shadowModel: ShadowSettings | null
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

const repositoryRoot = fileURLToPath(new URL('..', import.meta.url))

export function parseStorageUrl(url: string | undefined): StorageConfig {
  if (url === undefined) return { kind: 'pglite', dataDir: resolve('data') }
  if (/^postgres(ql)?:\/\//.test(url)) return { kind: 'postgres', url }
  if (url === 'pglite://memory') return { kind: 'pglite', dataDir: null }
  if (url.startsWith('pglite://')) return { kind: 'pglite', dataDir: resolve(url.slice('pglite://'.length)) }
  throw new ConfigError('DATABASE_URL must start with postgres://, postgresql:// or pglite://')
}

function readEnv(source: Record<string, string | undefined>): Env {
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(EnvSchema.properties)) {
    const value = source[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  // Value.Convert reads "true" as 1, "1e3" as 1 and "3000.5" as 3000: whole numbers are checked as text first.
  const notWhole = Object.entries(EnvSchema.properties)
    .filter(([key, schema]) => schema.type === 'integer' && raw[key] !== undefined && !/^\d+$/.test(String(raw[key]).trim()))
    .map(([key]) => key)
  const converted = Value.Convert(EnvSchema, Value.Default(EnvSchema, raw))
  const problems = [
    ...notWhole.map((key) => `${key}: Expected a whole number`),
    ...[...Value.Errors(EnvSchema, converted)]
      .filter((p) => !notWhole.includes(p.path.slice(1)))
      .map((p) => `${p.path.slice(1) || '(env)'}: ${p.message}`),
  ]
  if (problems.length > 0) throw new ConfigError(`invalid environment: ${problems.join('; ')}`)
  return converted as Env
}

/** The one token key configured, or, with none, a generated one (made by start-up). */
function resolveJwt(env: Env, storage: StorageConfig): JwtConfig | GeneratedKey {
  const configured = [env.JWT_SECRET, env.JWT_PUBLIC_KEY, env.JWT_JWKS_URL].filter((v) => v !== undefined)
  if (configured.length > 1) throw new ConfigError('set only one of JWT_SECRET, JWT_PUBLIC_KEY, JWT_JWKS_URL')
  if (env.JWT_SECRET !== undefined) return { mode: 'secret', secret: env.JWT_SECRET, generated: false }
  if (env.JWT_PUBLIC_KEY !== undefined) return { mode: 'public-key', publicKey: env.JWT_PUBLIC_KEY.replace(/\\n/g, '\n') }
  if (env.JWT_JWKS_URL !== undefined) return { mode: 'jwks', jwksUrl: env.JWT_JWKS_URL }
  if (storage.kind === 'postgres') {
    throw new ConfigError('with DATABASE_URL=postgres://… set JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL')
  }
  return { mode: 'generated', file: storage.dataDir === null ? null : join(storage.dataDir, 'jwt-secret') }
}

/** `true`, `false`, or a comma-separated list of proxy addresses or CIDR ranges to trust. */
function parseTrustProxy(value: string | undefined): ProxyTrust {
  try {
    return parseProxyTrust(value)
  } catch (error) {
    throw new ConfigError(`TRUST_PROXY: ${(error as Error).message} (expected true, false, a hop count, or proxy addresses/CIDRs separated by commas)`)
  }
}

/** `https://admin.example.com,http://localhost:5173`: each an origin (scheme, host, port), nothing more. */
function parseOrigins(value: string | undefined): string[] {
  if (value === undefined) return []
  const origins = value.split(',').map((o) => o.trim()).filter((o) => o !== '')
  for (const origin of origins) {
    let parsed: URL
    try {
      parsed = new URL(origin)
    } catch {
      throw new ConfigError(`CORS_ORIGINS: ${origin} is not an origin like https://admin.example.com`)
    }
    if (!['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== origin) {
      throw new ConfigError(`CORS_ORIGINS: ${origin} is not an origin like https://admin.example.com (scheme, host and port only)`)
    }
  }
  return origins
}

/** `none`, or a comma-separated list of addresses, CIDR ranges and proxy-addr's names (`loopback`, `linklocal`, `uniquelocal`). */
function parseExempt(value: string): string[] {
  if (value.trim() === 'none') return []
  try {
    return parseAddressList(value)
  } catch (error) {
    throw new ConfigError(`CONNECTION_LIMIT_EXEMPT: ${(error as Error).message} (expected none, or addresses/CIDRs such as loopback, 10.0.0.0/8 separated by commas)`)
  }
}

/** The less verbose of two levels. */
function quieter(a: LogLevel, b: LogLevel): LogLevel {
  const rank = (level: LogLevel) => (level === 'silent' ? -1 : LOG_LEVELS.indexOf(level))
  return rank(a) <= rank(b) ? a : b
}

/** What a command that only opens the database reads (migrate, audit verify, model check): no token key. */
export type DatabaseConfig = Pick<Config, 'storage' | 'database' | 'modelPath'>

function databaseConfig(env: Env): DatabaseConfig {
  return {
    storage: parseStorageUrl(env.DATABASE_URL),
    database: {
      connectTimeoutMs: env.DB_CONNECT_TIMEOUT_MS,
      statementTimeoutMs: env.DB_STATEMENT_TIMEOUT_MS,
      poolMax: env.DB_POOL_MAX,
      startupTimeoutMs: env.DB_STARTUP_TIMEOUT_MS,
    },
    modelPath: resolve(env.MODEL_PATH ?? join(repositoryRoot, 'model.conf')),
  }
}

/** The environment checked as readSettings checks it, read for a command that issues and verifies no token. */
export function loadDatabaseConfig(source: Record<string, string | undefined> = process.env): DatabaseConfig {
  return databaseConfig(readEnv(source))
}

/** The settings the environment gives (start-up makes them the Config: src/startup.ts). Creates, writes and reads no file. */
export function readSettings(source: Record<string, string | undefined> = process.env): Settings {
  const env = readEnv(source)
  const { storage, database, modelPath } = databaseConfig(env)
  const hasEmail = env.BOOTSTRAP_ADMIN_EMAIL !== undefined
  const hasPassword = env.BOOTSTRAP_ADMIN_PASSWORD !== undefined
  if (hasEmail !== hasPassword) throw new ConfigError('set both BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD, or neither')
  return {
    storage,
    host: env.HOST,
    port: env.PORT,
    jwt: resolveJwt(env, storage),
    jwtIssuer: env.JWT_ISSUER,
    jwtAudience: env.JWT_AUDIENCE,
    tokenTtlSeconds: env.JWT_TTL_SECONDS,
    bootstrapAdmin:
      env.BOOTSTRAP_ADMIN_EMAIL !== undefined && env.BOOTSTRAP_ADMIN_PASSWORD !== undefined
        ? { email: env.BOOTSTRAP_ADMIN_EMAIL, password: env.BOOTSTRAP_ADMIN_PASSWORD }
        : null,
    defaultLocale: env.DEFAULT_LOCALE,
    modelPath,
    modelDecisions: {
      path: env.MODEL_DECISIONS_PATH !== undefined ? resolve(env.MODEL_DECISIONS_PATH) : join(dirname(modelPath), 'model.decisions'),
      explicit: env.MODEL_DECISIONS_PATH !== undefined,
      allowFailing: env.ALLOW_FAILING_MODEL_DECISIONS === 'true',
    },
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    logLevel: env.LOG_LEVEL as LogLevel,
    checkLogLevel: (env.CHECK_LOG_LEVEL as LogLevel | undefined) ?? quieter(env.LOG_LEVEL as LogLevel, 'warn'),
    loginRateLimitPerMinute: env.LOGIN_RATE_LIMIT_PER_MINUTE,
    loginAccountFailures: env.LOGIN_ACCOUNT_FAILURES,
    replication: {
      pollMs: env.REVISION_POLL_MS,
      minRevisionWaitMs: env.MIN_REVISION_WAIT_MS,
      maxStalenessMs: env.MAX_STALENESS_MS,
    },
    database,
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    routeMapPath: env.ROUTE_MAP_PATH === undefined ? null : resolve(env.ROUTE_MAP_PATH),
    metricsToken: env.METRICS_TOKEN,
    corsOrigins: parseOrigins(env.CORS_ORIGINS),
    subRolesExplicit: env.SUB_ROLES_EXPLICIT === 'true',
    connections: {
      requestTimeoutMs: env.REQUEST_TIMEOUT_MS,
      maxPerAddress: env.MAX_CONNECTIONS_PER_ADDRESS,
      exempt: parseExempt(env.CONNECTION_LIMIT_EXEMPT),
    },
    changeStream: {
      retentionDays: env.CHANGE_RETENTION_DAYS,
      heartbeatMs: env.CHANGE_STREAM_HEARTBEAT_MS,
      maxMs: env.CHANGE_STREAM_MAX_MS,
      bufferBytes: env.CHANGE_STREAM_BUFFER_BYTES,
      perAddress: env.CHANGE_STREAMS_PER_ADDRESS,
    },
    grpc: grpcConfig(env),
    decisionLog: decisionLogConfig(env),
    shadowModel: env.SHADOW_MODEL_PATH === undefined ? null : { path: resolve(env.SHADOW_MODEL_PATH), sample: Number(env.SHADOW_SAMPLE) },
  }
}

/** One entry of DECISION_LOG_SINKS: `stdout`, `file:<path>`, `http:<url>` or `postgres`. */
function parseSink(entry: string): DecisionSinkSpec {
  if (entry === 'stdout' || entry === 'postgres') return { kind: entry }
  if (entry.startsWith('file:') && entry.length > 5) return { kind: 'file', path: resolve(entry.slice(5)) }
  if (entry.startsWith('http:')) {
    const url = entry.slice(5)
    if (/^https?:\/\/./.test(url) && URL.canParse(url)) return { kind: 'http', url }
  }
  throw new ConfigError(`DECISION_LOG_SINKS: ${entry} is not stdout, file:<path>, http:<http(s) URL> or postgres`)
}

function decisionLogConfig(env: Env): DecisionLogConfig {
  const entries = env.DECISION_LOG_SINKS.split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
  let clientIpPrefix = WHOLE_ADDRESS
  if (env.DECISION_LOG_CLIENT_IP_PREFIX !== undefined) {
    try {
      clientIpPrefix = parseAddressPrefix(env.DECISION_LOG_CLIENT_IP_PREFIX)
    } catch (error) {
      throw new ConfigError(`DECISION_LOG_CLIENT_IP_PREFIX: ${(error as Error).message}`)
    }
  }
  return {
    mode: env.DECISION_LOG,
    allowSample: env.DECISION_LOG_ALLOW_SAMPLE,
    sinks: entries.map(parseSink),
    includeQuery: env.DECISION_LOG_QUERY === 'true',
    clientIpPrefix,
    bufferEvents: env.DECISION_LOG_BUFFER_EVENTS,
    batchEvents: env.DECISION_LOG_BATCH_EVENTS,
    batchBytes: env.DECISION_LOG_BATCH_BYTES,
    batchMs: env.DECISION_LOG_BATCH_MS,
    sinkTimeoutMs: env.DECISION_LOG_SINK_TIMEOUT_MS,
    fileMaxBytes: env.DECISION_LOG_FILE_MAX_BYTES,
    fileMaxFiles: env.DECISION_LOG_FILE_MAX_FILES,
    retentionDays: env.DECISION_LOG_RETENTION_DAYS,
  }
}

/** GRPC_PORT turns the gRPC server on; its TLS needs both files or neither. */
function grpcConfig(env: Env): GrpcConfig | null {
  const hasCert = env.GRPC_TLS_CERT !== undefined
  if (hasCert !== (env.GRPC_TLS_KEY !== undefined)) throw new ConfigError('set both GRPC_TLS_CERT and GRPC_TLS_KEY, or neither')
  if (env.GRPC_PORT === undefined) {
    if (hasCert) throw new ConfigError('GRPC_TLS_CERT and GRPC_TLS_KEY need GRPC_PORT')
    return null
  }
  const tls = env.GRPC_TLS_CERT !== undefined && env.GRPC_TLS_KEY !== undefined ? { certPath: resolve(env.GRPC_TLS_CERT), keyPath: resolve(env.GRPC_TLS_KEY) } : null
  return { port: env.GRPC_PORT, tls }
}
