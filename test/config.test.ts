import fs, { readdirSync, readFileSync, statSync } from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { join, resolve } from 'node:path'
import t from 'tap'
import { ConfigError, parseStorageUrl, readSettings } from '../src/config.js'
import { loadConfig } from '../src/startup.js'
import { tempDir } from './helper.js'
import { onceOnPGlite } from './support/onceOnPGlite.js'

onceOnPGlite('configuration parsing reads no database')

const SECRET = 'x'.repeat(32)
const repositoryModel = new URL('../model.conf', import.meta.url).pathname

t.test('an empty environment: the documented defaults', async (t) => {
  // The default store is ./data of the working directory; run that in a temp folder.
  const dir = tempDir(t, 'aps-config-')
  const previous = process.cwd()
  process.chdir(dir)
  t.teardown(() => process.chdir(previous))
  const config = loadConfig({})
  t.same(config.storage, { kind: 'pglite', dataDir: resolve(process.cwd(), 'data') }, 'embedded PGlite under ./data')
  t.equal(config.port, 3000)
  t.equal(config.host, '0.0.0.0')
  t.equal(config.defaultLocale, 'en')
  t.equal(config.tokenTtlSeconds, 3600)
  t.equal(config.logLevel, 'info')
  t.equal(config.checkLogLevel, 'warn', 'the gateway checks are not logged one by one')
  t.equal(config.trustProxy, false)
  t.equal(config.bootstrapAdmin, null)
  t.equal(config.jwtIssuer, undefined)
  t.equal(config.jwtAudience, undefined)
  t.equal(config.modelPath, repositoryModel, 'model.conf at the repository root, wherever the process runs')
  t.equal(config.jwt.mode, 'secret')
  t.equal((config.jwt as { generated: boolean }).generated, true)
  t.ok(statSync(join(dir, 'data', 'jwt-secret')).isFile(), 'start-up keeps the generated key in the data folder')
})

t.test('reading the settings touches no file: start-up makes the data folder and key, and reads the route map', async (t) => {
  const dir = tempDir(t, 'aps-config-')
  const env = { DATABASE_URL: `pglite://${join(dir, 'store')}`, ROUTE_MAP_PATH: join(dir, 'routes.json') }
  // Every call into node:fs while the settings are read, through the module's functions as any importer sees them.
  const calls: string[] = []
  const originals = new Map<string, unknown>()
  for (const [name, fn] of Object.entries(fs)) {
    if (typeof fn !== 'function' || /^[A-Z]/.test(name)) continue
    originals.set(name, fn)
    ;(fs as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      calls.push(name)
      return (fn as (...a: unknown[]) => unknown)(...args)
    }
  }
  syncBuiltinESMExports()
  let settings: ReturnType<typeof readSettings>
  try {
    settings = readSettings(env)
  } finally {
    for (const [name, fn] of originals) (fs as unknown as Record<string, unknown>)[name] = fn
    syncBuiltinESMExports()
  }
  t.same(calls, [], 'no call into node:fs')
  t.same(readdirSync(dir), [], 'no data folder, no key file')
  t.same(settings.jwt, { mode: 'generated', file: join(dir, 'store', 'jwt-secret') }, 'the key is named, not made')
  t.equal(settings.routeMapPath, join(dir, 'routes.json'), 'the route map is named, not read (the file does not exist)')
  t.throws(() => loadConfig(env), /ROUTE_MAP_PATH: cannot read/, 'start-up reads it')
})

t.test('explicit values are read and converted', async (t) => {
  const config = loadConfig({
    DATABASE_URL: 'postgres://u:p@db.example:5432/aps',
    HOST: '127.0.0.1',
    PORT: '8080',
    JWT_SECRET: SECRET,
    JWT_ISSUER: 'https://issuer.example',
    JWT_AUDIENCE: 'admin-api',
    JWT_TTL_SECONDS: '900',
    BOOTSTRAP_ADMIN_EMAIL: 'root@example.com',
    BOOTSTRAP_ADMIN_PASSWORD: 'root-password-1',
    DEFAULT_LOCALE: 'es',
    MODEL_PATH: 'custom/model.conf',
    LOG_LEVEL: 'warn',
    TRUST_PROXY: 'true',
  })
  t.same(config.storage, { kind: 'postgres', url: 'postgres://u:p@db.example:5432/aps' })
  t.equal(config.host, '127.0.0.1')
  t.equal(config.port, 8080, 'PORT becomes a number')
  t.same(config.jwt, { mode: 'secret', secret: SECRET, generated: false })
  t.equal(config.jwtIssuer, 'https://issuer.example')
  t.equal(config.jwtAudience, 'admin-api')
  t.equal(config.tokenTtlSeconds, 900)
  t.same(config.bootstrapAdmin, { email: 'root@example.com', password: 'root-password-1' })
  t.equal(config.defaultLocale, 'es')
  t.equal(config.modelPath, resolve('custom/model.conf'), 'MODEL_PATH relative to the working directory')
  t.equal(config.logLevel, 'warn')
  t.same(config.trustProxy, { hops: 1 }, 'TRUST_PROXY=true: one proxy in front')
  t.same(loadConfig({ DATABASE_URL: 'pglite://memory', TRUST_PROXY: '10.0.0.1,10.0.0.0/8' }).trustProxy, { addresses: ['10.0.0.1', '10.0.0.0/8'] })
  t.same(loadConfig({ DATABASE_URL: 'pglite://memory', TRUST_PROXY: '2' }).trustProxy, { hops: 2 })
  t.equal(loadConfig({ DATABASE_URL: 'pglite://memory', TRUST_PROXY: 'false' }).trustProxy, false)
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', TRUST_PROXY: '10.0.0.300' }), { name: 'ConfigError', message: /TRUST_PROXY/ })
  t.equal(loadConfig({ DATABASE_URL: 'pglite://memory', PORT: '' }).port, 3000, 'an empty variable counts as unset')
})

t.test('DATABASE_URL', async (t) => {
  t.same(parseStorageUrl(undefined), { kind: 'pglite', dataDir: resolve('data') })
  t.same(parseStorageUrl('postgres://u:p@h/db'), { kind: 'postgres', url: 'postgres://u:p@h/db' })
  t.same(parseStorageUrl('postgresql://h/db'), { kind: 'postgres', url: 'postgresql://h/db' })
  t.same(parseStorageUrl('pglite://memory'), { kind: 'pglite', dataDir: null })
  t.same(parseStorageUrl('pglite://some/dir'), { kind: 'pglite', dataDir: resolve('some/dir') }, 'a relative folder')
  t.same(parseStorageUrl('pglite:///var/lib/aps'), { kind: 'pglite', dataDir: '/var/lib/aps' }, 'an absolute folder')
  for (const bad of ['mysql://h/db', 'sqlite://file.db', 'postgres:/h/db', 'data', 'PGLITE://memory']) {
    t.throws(() => parseStorageUrl(bad), { name: 'ConfigError', message: /DATABASE_URL must start with/ }, bad)
  }
  t.throws(() => loadConfig({ DATABASE_URL: 'mysql://h/db' }), ConfigError, 'loadConfig refuses it too')
})

t.test('invalid values stop the start with the variable named', async (t) => {
  const memory = { DATABASE_URL: 'pglite://memory' }
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'eighty' }, /PORT/],
    [{ PORT: '3000.5' }, /PORT: Expected a whole number/],
    [{ PORT: 'true' }, /PORT: Expected a whole number/],
    [{ PORT: '1e3' }, /PORT: Expected a whole number/],
    [{ PORT: '0x10' }, /PORT: Expected a whole number/],
    [{ JWT_TTL_SECONDS: '1e4' }, /JWT_TTL_SECONDS: Expected a whole number/],
    [{ LOGIN_RATE_LIMIT_PER_MINUTE: 'true' }, /LOGIN_RATE_LIMIT_PER_MINUTE/],
    [{ PORT: '70000' }, /PORT/],
    [{ PORT: '-1' }, /PORT/],
    [{ JWT_SECRET: 'short' }, /JWT_SECRET/],
    [{ JWT_JWKS_URL: 'ftp://keys.example/jwks.json' }, /JWT_JWKS_URL/],
    [{ JWT_TTL_SECONDS: '30' }, /JWT_TTL_SECONDS/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ DEFAULT_LOCALE: 'english' }, /DEFAULT_LOCALE/],
    [{ BOOTSTRAP_ADMIN_PASSWORD: 'short', BOOTSTRAP_ADMIN_EMAIL: 'a@b.co' }, /BOOTSTRAP_ADMIN_PASSWORD/],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig({ ...memory, ...env }), { name: 'ConfigError', message }, JSON.stringify(env))
  }
})

t.test('one way to verify tokens', async (t) => {
  const memory = { DATABASE_URL: 'pglite://memory' }
  const publicKey = '-----BEGIN PUBLIC KEY-----\\nMFkw\\n-----END PUBLIC KEY-----'
  for (const pair of [
    { JWT_SECRET: SECRET, JWT_PUBLIC_KEY: publicKey },
    { JWT_SECRET: SECRET, JWT_JWKS_URL: 'https://k.example/jwks.json' },
    { JWT_PUBLIC_KEY: publicKey, JWT_JWKS_URL: 'https://k.example/jwks.json' },
  ]) {
    t.throws(() => loadConfig({ ...memory, ...pair }), /set only one of JWT_SECRET, JWT_PUBLIC_KEY, JWT_JWKS_URL/, Object.keys(pair).join('+'))
  }
  t.same(
    loadConfig({ ...memory, JWT_PUBLIC_KEY: publicKey }).jwt,
    { mode: 'public-key', publicKey: '-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----' },
    'escaped newlines in a one-line PEM become real ones',
  )
  t.same(loadConfig({ ...memory, JWT_JWKS_URL: 'https://k.example/jwks.json' }).jwt, { mode: 'jwks', jwksUrl: 'https://k.example/jwks.json' })

  t.throws(() => loadConfig({ DATABASE_URL: 'postgres://h/db' }), /with DATABASE_URL=postgres:\/\/… set JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL/)
  t.equal(loadConfig({ DATABASE_URL: 'postgres://h/db', JWT_SECRET: SECRET }).jwt.mode, 'secret')
  t.equal(loadConfig({ DATABASE_URL: 'postgres://h/db', JWT_PUBLIC_KEY: publicKey }).jwt.mode, 'public-key')
  t.equal(loadConfig({ DATABASE_URL: 'postgres://h/db', JWT_JWKS_URL: 'https://k.example/jwks.json' }).jwt.mode, 'jwks')
})

t.test('an embedded store keeps one generated key in its data folder', async (t) => {
  const dir = tempDir(t, 'aps-config-')
  const store = join(dir, 'store')
  const first = loadConfig({ DATABASE_URL: `pglite://${store}` })
  const second = loadConfig({ DATABASE_URL: `pglite://${store}` })
  t.equal(first.jwt.mode, 'secret')
  t.same(first.jwt, second.jwt, 'the same secret on every start')
  const file = join(store, 'jwt-secret')
  t.match(readFileSync(file, 'utf8'), /^[0-9a-f]{64}$/, '32 random bytes, hex')
  t.equal(statSync(file).mode & 0o777, 0o600, 'readable by the owner only')

  const other = loadConfig({ DATABASE_URL: `pglite://${join(dir, 'other')}` })
  t.not((other.jwt as { secret: string }).secret, (first.jwt as { secret: string }).secret, 'another store, another key')
  const configured = loadConfig({ DATABASE_URL: `pglite://${join(dir, 'configured')}`, JWT_SECRET: SECRET })
  t.same(configured.jwt, { mode: 'secret', secret: SECRET, generated: false }, 'a configured secret wins')
  t.throws(() => statSync(join(dir, 'configured', 'jwt-secret')), 'and nothing is generated')

  const memory = loadConfig({ DATABASE_URL: 'pglite://memory' })
  const memory2 = loadConfig({ DATABASE_URL: 'pglite://memory' })
  t.not((memory.jwt as { secret: string }).secret, (memory2.jwt as { secret: string }).secret, 'in memory: a fresh one per load')
})

t.test('BOOTSTRAP_ADMIN_*: both or neither', async (t) => {
  const memory = { DATABASE_URL: 'pglite://memory' }
  t.throws(() => loadConfig({ ...memory, BOOTSTRAP_ADMIN_EMAIL: 'a@b.co' }), /set both BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD, or neither/)
  t.throws(() => loadConfig({ ...memory, BOOTSTRAP_ADMIN_PASSWORD: 'long-enough-1' }), /set both/)
  t.equal(loadConfig(memory).bootstrapAdmin, null)
  t.same(loadConfig({ ...memory, BOOTSTRAP_ADMIN_EMAIL: 'a@b.co', BOOTSTRAP_ADMIN_PASSWORD: 'long-enough-1' }).bootstrapAdmin, {
    email: 'a@b.co',
    password: 'long-enough-1',
  })
})

t.test('CHECK_LOG_LEVEL: warn by default, never more verbose than LOG_LEVEL unless set', async (t) => {
  const base = { DATABASE_URL: 'pglite://memory', JWT_SECRET: 'a-secret-long-enough-0123' }
  t.equal(loadConfig({ ...base, LOG_LEVEL: 'debug' }).checkLogLevel, 'warn')
  t.equal(loadConfig({ ...base, LOG_LEVEL: 'error' }).checkLogLevel, 'error')
  t.equal(loadConfig({ ...base, LOG_LEVEL: 'silent' }).checkLogLevel, 'silent')
  t.equal(loadConfig({ ...base, CHECK_LOG_LEVEL: 'info' }).checkLogLevel, 'info', 'an operator may log every check')
  t.throws(() => loadConfig({ ...base, CHECK_LOG_LEVEL: 'loud' }), /CHECK_LOG_LEVEL/)
})

t.test('GRPC_PORT turns gRPC on; its TLS needs both files', async (t) => {
  const base = { DATABASE_URL: 'pglite://memory', JWT_SECRET: SECRET }
  t.equal(readSettings(base).grpc, null, 'off by default')
  t.same(readSettings({ ...base, GRPC_PORT: '9191' }).grpc, { port: 9191, tls: null }, 'cleartext HTTP/2')
  t.same(readSettings({ ...base, GRPC_PORT: '9191', GRPC_TLS_CERT: 'c.pem', GRPC_TLS_KEY: 'k.pem' }).grpc, {
    port: 9191,
    tls: { certPath: resolve('c.pem'), keyPath: resolve('k.pem') },
  })
  t.throws(() => readSettings({ ...base, GRPC_PORT: '9191', GRPC_TLS_CERT: 'c.pem' }), new ConfigError('set both GRPC_TLS_CERT and GRPC_TLS_KEY, or neither'))
  t.throws(() => readSettings({ ...base, GRPC_TLS_CERT: 'c.pem', GRPC_TLS_KEY: 'k.pem' }), new ConfigError('GRPC_TLS_CERT and GRPC_TLS_KEY need GRPC_PORT'))
  t.throws(() => readSettings({ ...base, GRPC_PORT: '70000' }), ConfigError, 'a port out of range')
})

t.test('DECISION_LOG_*: the mode, the sinks and the address prefix, read and checked', async (t) => {
  const base = { DATABASE_URL: 'pglite://memory', JWT_SECRET: 'a-secret-long-enough-0123' }
  const defaults = loadConfig(base).decisionLog
  t.match(defaults, { mode: 'denies', allowSample: 1, sinks: [], includeQuery: false, clientIpPrefix: { v4: 32, v6: 128 } })
  const set = loadConfig({
    ...base,
    DECISION_LOG: 'all',
    DECISION_LOG_ALLOW_SAMPLE: '0.25',
    DECISION_LOG_SINKS: ' stdout , file:logs/decisions.ndjson,http:https://siem.example/ingest?x=1,postgres',
    DECISION_LOG_QUERY: 'true',
    DECISION_LOG_CLIENT_IP_PREFIX: '24,48',
  }).decisionLog
  t.match(set, { mode: 'all', allowSample: 0.25, includeQuery: true, clientIpPrefix: { v4: 24, v6: 48 } })
  t.same(set.sinks, [
    { kind: 'stdout' },
    { kind: 'file', path: resolve('logs/decisions.ndjson') },
    { kind: 'http', url: 'https://siem.example/ingest?x=1' },
    { kind: 'postgres' },
  ])
  t.throws(() => loadConfig({ ...base, DECISION_LOG: 'some' }), /DECISION_LOG/)
  t.throws(() => loadConfig({ ...base, DECISION_LOG_ALLOW_SAMPLE: '1.5' }), /DECISION_LOG_ALLOW_SAMPLE/)
  for (const sinks of ['kafka', 'file:', 'http:ftp://x', 'http:', 'stdout,syslog']) {
    t.throws(() => loadConfig({ ...base, DECISION_LOG_SINKS: sinks }), /DECISION_LOG_SINKS/, `${sinks} refused`)
  }
  t.throws(() => loadConfig({ ...base, DECISION_LOG_CLIENT_IP_PREFIX: '24,200' }), /DECISION_LOG_CLIENT_IP_PREFIX/)
})
