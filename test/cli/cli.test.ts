import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createVerifier } from 'fast-jwt'
import t from 'tap'
import { runCli } from '../../src/cli/run.js'
import { parseTtl } from '../../src/cli/commands.js'
import { TEST_SECRET, buildTestApp, freshDatabase, postgresUrl } from '../helper.js'

function capture() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (l: string) => void out.push(l), err: (l: string) => void err.push(l) }, out, err }
}

t.test('the command line, in process, on one store', async (t) => {
  const db = await freshDatabase(t)
  const env = { DATABASE_URL: postgresUrl ?? 'pglite://memory', JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' }
  const cli = async (...argv: string[]) => {
    const c = capture()
    const code = await runCli(argv, { env, io: c.io, db })
    return { code, out: c.out.join('\n'), err: c.err.join('\n') }
  }

  const migrated = await cli('migrate')
  t.equal(migrated.code, 0)
  t.match(migrated.out, /applied 001_accounts, 002_policy, 003_audit_protection/)
  t.match((await cli('migrate')).out, /up to date/, 'a second run applies nothing')

  const first = await cli('bootstrap', '--email', 'Root@Example.com', '--password', 'root-password-1')
  t.equal(first.code, 0)
  t.match(first.out, /created the system-owner super_admin/)
  const again = await cli('bootstrap', '--email', 'other@example.com', '--password', 'root-password-2')
  t.equal(again.code, 0)
  t.match(again.out, /already exists/)
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM admin_accounts WHERE sub_role_code = 'super_admin' AND merchant_id IS NULL")
  t.equal(rows[0]?.n, 1, 'one system super_admin')

  const onboarded = await cli('onboard-merchant', '--merchant-id', 'm-7', '--email', 'owner@m7.example', '--password', 'owner-pass-1')
  t.equal(onboarded.code, 0)
  t.match(onboarded.out, /onboarded merchant m-7/)
  const twice = await cli('onboard-merchant', '--merchant-id', 'm-7', '--email', 'other@m7.example', '--password', 'owner-pass-1')
  t.equal(twice.code, 1)
  t.match(twice.err, /already exists/)
  for (const bad of [
    ['--merchant-id', 'global', '--email', 'g@x.example', '--password', 'owner-pass-1'],
    ['--merchant-id', 'a,b', '--email', 'g@x.example', '--password', 'owner-pass-1'],
    ['--merchant-id', 'm-8', '--email', 'not-an-email', '--password', 'owner-pass-1'],
    ['--merchant-id', 'm-8', '--email', 'g@x.example', '--password', 'short'],
    ['--merchant-id', 'm-8', '--email', 'g@x.example'],
  ]) {
    t.equal((await cli('onboard-merchant', ...bad)).code, 2, bad.join(' '))
  }

  const token = await cli('token', '--email', 'root@example.com', '--ttl', '30m')
  t.equal(token.code, 0)
  const claims = createVerifier({ key: TEST_SECRET, algorithms: ['HS256'] })(token.out) as { sub: string; exp: number; iat: number; principal_type: string }
  t.equal(claims.principal_type, 'system_owner')
  t.equal(claims.exp - claims.iat, 1800)
  const ta = await buildTestApp(t, { db })
  const profile = await ta.call({ method: 'GET', url: '/v2/profile', token: token.out })
  t.equal(profile.statusCode, 200, 'the printed token works against the API')
  t.equal(profile.json().data.email, 'Root@Example.com')
  t.equal((await cli('token', '--email', 'nobody@example.com')).code, 1)
  t.equal((await cli('token', '--email', 'root@example.com', '--ttl', 'soon')).code, 2)

  const check = await cli('model', 'check')
  t.equal(check.code, 0)
  t.match(check.out, /is valid/)
  t.match(check.out, /decision index/)
  const dir = mkdtempSync(join(tmpdir(), 'cli-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'broken.conf'), '[request_definition]\nr = sub, obj\n')
  const broken = await cli('model', 'check', '--model', join(dir, 'broken.conf'))
  t.equal(broken.code, 1)
  t.match(broken.err, /model/)
  t.notMatch(broken.err, /\n\s+at /, 'no stack trace')
  const missing = await cli('model', 'check', '--model', join(dir, 'nope.conf'))
  t.equal(missing.code, 1)

  const verified = await cli('audit', 'verify')
  t.equal(verified.code, 0)
  t.match(verified.out, /whole/)
  await db.transaction(async (tx) => {
    await tx.query('ALTER TABLE permission_audit DISABLE TRIGGER USER')
    await tx.query("UPDATE permission_audit SET ip = '6.6.6.6' WHERE id = (SELECT min(id) + 2 FROM permission_audit)")
    await tx.query('ALTER TABLE permission_audit ENABLE TRIGGER USER')
  })
  const tampered = await cli('audit', 'verify')
  t.equal(tampered.code, 1)
  t.match(tampered.err, /was edited/)

  t.equal((await cli('frobnicate')).code, 2)
  t.equal((await cli()).code, 2)
  t.equal((await cli('--help')).code, 0)
  const badEnv = capture()
  t.equal(await runCli(['migrate'], { env: { DATABASE_URL: 'mysql://x' }, io: badEnv.io }), 1)
  t.match(badEnv.err.join(''), /DATABASE_URL/)
})

t.test('ttl parsing', async (t) => {
  t.equal(parseTtl('90'), 90)
  t.equal(parseTtl('30m'), 1800)
  t.equal(parseTtl('1h'), 3600)
  t.equal(parseTtl('2d'), 172800)
  t.throws(() => parseTtl('0'))
  t.throws(() => parseTtl('1w'))
})

t.test('the real command line, as a process', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cli-run-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      env: { ...process.env, DATABASE_URL: `pglite://${dir}`, LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    })
  const migrated = run('migrate')
  t.equal(migrated.status, 0, migrated.stderr)
  t.match(migrated.stdout, /applied 001_accounts/)
  const usage = run('nonsense')
  t.equal(usage.status, 2)
  t.match(usage.stderr, /usage:/)
})
