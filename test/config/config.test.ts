import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { loadConfig, parseStorageUrl } from '../../src/config.js'

t.test('defaults', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'aps-config-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({ DATABASE_URL: `pglite://${dir}` })
  t.equal(config.port, 3000)
  t.equal(config.host, '0.0.0.0')
  t.equal(config.defaultLocale, 'en')
  t.equal(config.trustProxy, false)
  t.equal(config.bootstrapAdmin, null)
  t.match(config.modelPath, /model\.conf$/)
  t.same(parseStorageUrl(undefined), { kind: 'pglite', dataDir: resolve('data') }, 'no DATABASE_URL: ./data')
})

t.test('DATABASE_URL', async (t) => {
  t.same(parseStorageUrl('postgres://u:p@h/db'), { kind: 'postgres', url: 'postgres://u:p@h/db' })
  t.same(parseStorageUrl('postgresql://h/db'), { kind: 'postgres', url: 'postgresql://h/db' })
  t.same(parseStorageUrl('pglite://memory'), { kind: 'pglite', dataDir: null })
  t.same(parseStorageUrl('pglite://some/dir'), { kind: 'pglite', dataDir: resolve('some/dir') })
  t.throws(() => parseStorageUrl('mysql://h/db'), { name: 'ConfigError', message: /DATABASE_URL must start with/ })
})

t.test('invalid values stop the start with the variable named', async (t) => {
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', PORT: 'eighty' }), /PORT/)
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', PORT: '70000' }), /PORT/)
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', JWT_SECRET: 'short' }), /JWT_SECRET/)
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', LOG_LEVEL: 'loud' }), /LOG_LEVEL/)
  t.throws(() => loadConfig({ DATABASE_URL: 'pglite://memory', BOOTSTRAP_ADMIN_EMAIL: 'a@b.co' }), /both/)
  t.throws(
    () => loadConfig({ DATABASE_URL: 'pglite://memory', JWT_SECRET: 'x'.repeat(20), JWT_JWKS_URL: 'https://k.example/jwks.json' }),
    /only one/,
  )
  t.throws(() => loadConfig({ DATABASE_URL: 'postgres://h/db' }), /JWT_SECRET/, 'PostgreSQL needs a configured key')
  t.equal(loadConfig({ DATABASE_URL: 'postgres://h/db', JWT_SECRET: 'x'.repeat(20) }).jwt.mode, 'secret')
  t.equal(loadConfig({ DATABASE_URL: 'pglite://memory', TRUST_PROXY: '10.0.0.1,10.0.0.2' }).trustProxy, '10.0.0.1,10.0.0.2')
  t.equal(loadConfig({ DATABASE_URL: 'pglite://memory', TRUST_PROXY: 'true' }).trustProxy, true)
})

t.test('an embedded store keeps one generated key', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'aps-config-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const first = loadConfig({ DATABASE_URL: `pglite://${dir}` })
  const second = loadConfig({ DATABASE_URL: `pglite://${dir}` })
  t.equal(first.jwt.mode, 'secret')
  t.same(first.jwt, second.jwt, 'the same secret on every start')
  t.equal(readFileSync(join(dir, 'jwt-secret'), 'utf8').trim().length, 64)
  const memory = loadConfig({ DATABASE_URL: 'pglite://memory' })
  const memory2 = loadConfig({ DATABASE_URL: 'pglite://memory' })
  t.not((memory.jwt as { secret: string }).secret, (memory2.jwt as { secret: string }).secret, 'in memory: a fresh one per process')
})
