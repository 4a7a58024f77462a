import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createVerifier } from 'fast-jwt'
import t from 'tap'
import { parseTtl } from '../src/cli/inputs.js'
import type { Database } from '../src/storage/db.js'
import { openPGlite } from '../src/storage/pglite.js'
import { readMigrations } from '../src/storage/migrate.js'
import { ROOT_EMAIL, TEST_SECRET, buildTestApp, freshDatabase, register } from './helper.js'
import { processDatabase } from './support/serverProcess.js'
import { cliFor, cliOn } from './support/cli.js'
import { pgliteRunOnly } from './support/onceOnPGlite.js'
import { TEST_NODE_ARGS } from './support/nodeArgs.js'

const run = promisify(execFile)
const repositoryModel = new URL('../model.conf', import.meta.url)
const STACK_FRAME = /\n\s+at |\.ts:\d+|node_modules/

function tempDir(t: { teardown(fn: () => unknown): void }, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

async function systemSuperAdmins(db: Database): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM admin_accounts WHERE sub_role_code = 'super_admin' AND merchant_id IS NULL",
  )
  return rows[0]?.n ?? -1
}

const verify = createVerifier({ key: TEST_SECRET, algorithms: ['HS256'] })
const allMigrations = readMigrations().map((m) => m.version)

t.test('every command, in process, against one store', async (t) => {
  const db = await freshDatabase(t)
  const cli = cliOn(db)

  t.test('migrate applies each migration once and names them', async (t) => {
    const first = await cli('migrate')
    t.equal(first.code, 0)
    t.equal(first.out, `applied ${allMigrations.join(', ')}`)
    const second = await cli('migrate')
    t.equal(second.code, 0)
    t.match(second.out, /up to date; no migration applied/)
  })

  t.test('bootstrap creates the system-owner super_admin once', async (t) => {
    const first = await cli('bootstrap', '--email', 'Root@Example.com', '--password', 'root-password-1', '--name', 'Platform root')
    t.equal(first.code, 0, first.err)
    t.match(first.out, /created the system-owner super_admin Root@Example.com \([0-9a-f-]{36}\)/)
    const { rows } = await db.query<{ name: string; principal_type: string; parent_role: string | null }>(
      "SELECT name, principal_type, parent_role FROM admin_accounts WHERE sub_role_code = 'super_admin'",
    )
    t.same(rows, [{ name: 'Platform root', principal_type: 'system_owner', parent_role: null }])

    const again = await cli('bootstrap', '--email', 'other@example.com', '--password', 'root-password-2')
    t.equal(again.code, 0, 'a second run is not an error')
    t.match(again.out, /already exists; nothing was created/)
    t.equal(await systemSuperAdmins(db), 1, 'still one system super_admin')
    const { rows: others } = await db.query("SELECT 1 FROM admin_accounts WHERE email = 'other@example.com'")
    t.equal(others.length, 0, 'the second e-mail was not stored')
    const { rows: audit } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM permission_audit WHERE action = 'register'")
    t.equal(audit[0]?.n, 1, 'one register audit entry')
  })

  t.test('onboard-merchant creates a merchant and its super_admin, as the system', async (t) => {
    const made = await cli('onboard-merchant', '--merchant-id', 'm-7', '--email', 'owner@m7.example', '--password', 'owner-pass-1', '--phone', '+1 555 0100', '--display-name', 'Seven Books')
    t.equal(made.code, 0, made.err)
    t.match(made.out, /onboarded merchant m-7; its super_admin is owner@m7.example/)
    const { rows } = await db.query<Record<string, unknown>>(
      "SELECT name, phone, principal_type, merchant_id, sub_role_code, parent_role, created_by FROM admin_accounts WHERE merchant_id = 'm-7'",
    )
    t.same(rows, [
      { name: 'm-7 owner', phone: '+1 555 0100', principal_type: 'merchant', merchant_id: 'm-7', sub_role_code: 'super_admin', parent_role: 'system_owner', created_by: null },
    ])
    const { rows: audit } = await db.query<Record<string, unknown>>(
      "SELECT actor_id, actor_type, domain FROM permission_audit WHERE action = 'onboard'",
    )
    t.same(audit, [{ actor_id: 'system', actor_type: 'system', domain: 'm-7' }], 'audited with the system actor')
    t.same((await db.query("SELECT display_name FROM merchants WHERE id = 'm-7'")).rows, [{ display_name: 'Seven Books' }], 'named as --display-name says')

    const twice = await cli('onboard-merchant', '--merchant-id', 'm-7', '--email', 'other@m7.example', '--password', 'owner-pass-1')
    t.equal(twice.code, 1)
    t.equal(twice.err, 'This merchant already exists.', 'the service error in plain English')
    const taken = await cli('onboard-merchant', '--merchant-id', 'm-8', '--email', 'OWNER@m7.example', '--password', 'owner-pass-1')
    t.equal(taken.code, 1)
    t.equal(taken.err, 'An administrator with this e-mail already exists.')
  })

  t.test('onboard-merchant validates its input as the API does', async (t) => {
    const cases: Array<[string, string[], RegExp]> = [
      ['reserved id', ['--merchant-id', 'global', '--email', 'g@x.example', '--password', 'owner-pass-1'], /--merchant-id is reserved/],
      ['reserved id in capitals', ['--merchant-id', 'GLOBAL', '--email', 'g@x.example', '--password', 'owner-pass-1'], /--merchant-id is reserved/],
      ['comma in the id', ['--merchant-id', 'a,b', '--email', 'g@x.example', '--password', 'owner-pass-1'], /--merchant-id contains characters/],
      ['id too long', ['--merchant-id', 'm'.repeat(65), '--email', 'g@x.example', '--password', 'owner-pass-1'], /--merchant-id/],
      ['bad e-mail', ['--merchant-id', 'm-8', '--email', 'not-an-email', '--password', 'owner-pass-1'], /--email must be a valid e-mail address/],
      ['short password', ['--merchant-id', 'm-8', '--email', 'g@x.example', '--password', 'short77'], /--password must be at least 8 characters/],
      ['bad phone', ['--merchant-id', 'm-8', '--email', 'g@x.example', '--password', 'owner-pass-1', '--phone', 'call me'], /--phone/],
      ['no password', ['--merchant-id', 'm-8', '--email', 'g@x.example'], /--password is required/],
      ['unknown option', ['--merchant-id', 'm-8', '--email', 'g@x.example', '--password', 'owner-pass-1', '--role', 'x'], /--role/],
      ['display name with a control character', ['--merchant-id', 'm-8', '--email', 'g@x.example', '--password', 'owner-pass-1', '--display-name', 'a\u0007b'], /--display-name/],
      ['display name too long', ['--merchant-id', 'm-8', '--email', 'g@x.example', '--password', 'owner-pass-1', '--display-name', 'x'.repeat(121)], /--display-name/],
    ]
    for (const [name, args, message] of cases) {
      const result = await cli('onboard-merchant', ...args)
      t.equal(result.code, 2, `${name}: a usage error`)
      t.match(result.err, message, name)
      t.notMatch(result.err, STACK_FRAME, `${name}: no stack trace`)
    }
    const { rows } = await db.query("SELECT 1 FROM merchants WHERE id <> 'm-7'")
    t.equal(rows.length, 0, 'nothing was stored')
    const bootstrap = await cli('bootstrap', '--email', 'x@y.example', '--password', '1234567')
    t.equal(bootstrap.code, 2, 'bootstrap checks the password length too')
  })

  t.test('token prints an access token the API accepts', async (t) => {
    const printed = await cli('token', '--email', 'root@example.com', '--ttl', '30m')
    t.equal(printed.code, 0, printed.err)
    t.match(printed.out, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'only the token on stdout')
    const claims = verify(printed.out) as { sub: string; exp: number; iat: number; principal_type: string; merchant_id?: string; jti?: unknown }
    t.equal(claims.principal_type, 'system_owner')
    t.match(claims.jti, /^[\w-]{22,}$/, 'with an id of its own (a logout ends it alone)')
    t.equal(claims.exp - claims.iat, 1800, '--ttl 30m')
    t.notOk('merchant_id' in claims)
    const merchant = verify((await cli('token', '--email', 'owner@m7.example')).out) as { principal_type: string; merchant_id: string; exp: number; iat: number }
    t.same([merchant.principal_type, merchant.merchant_id], ['merchant', 'm-7'])
    t.equal(merchant.exp - merchant.iat, 3600, 'JWT_TTL_SECONDS by default')
    const twoDays = verify((await cli('token', '--email', 'root@example.com', '--ttl', '2d')).out) as { exp: number; iat: number }
    t.equal(twoDays.exp - twoDays.iat, 172800)

    const ta = await buildTestApp(t, { db })
    const profile = await ta.call({ method: 'GET', url: '/v2/profile', token: printed.out })
    t.equal(profile.statusCode, 200, 'the printed token works against the API')
    t.equal(profile.json().data.email, 'Root@Example.com')
    t.equal(profile.json().data.id, claims.sub)

    const nobody = await cli('token', '--email', 'nobody@example.com')
    t.equal(nobody.code, 1)
    t.match(nobody.err, /no administrator account has the e-mail nobody@example.com/)
    for (const ttl of ['soon', '1w', '0', '-5', '366d']) {
      t.equal((await cli('token', '--email', 'root@example.com', '--ttl', ttl)).code, 2, `--ttl ${ttl}`)
    }
    t.equal((await cli('token')).code, 2, '--email is required')
  })

  t.test('model check replays the stored policy through the model', async (t) => {
    const ta = await buildTestApp(t, { db })
    const grant = await ta.call({
      method: 'POST',
      url: '/v2/admin/permissions/roles/clerk/grant',
      body: { command: 'grant-role-permission', data: { obj: 'permission', act: 'read' } },
    })
    t.equal(grant.statusCode, 200, grant.body)
    const clerk = await register(ta, { email: 'clerk@example.com', sub_role_code: 'clerk' })
    const override = await ta.call({
      method: 'POST',
      url: `/v2/admin/permissions/users/${clerk.id}/grant`,
      body: { command: 'grant-user-permission', data: { obj: 'admin', act: 'register' } },
    })
    t.equal(override.statusCode, 200, override.body)

    const check = await cli('model', 'check')
    t.equal(check.code, 0, check.err)
    t.match(check.out, /model .*model\.conf is valid; the stored policy loads through it: 2 p rules \(overrides included\), 3 g rules/)
    t.match(check.out, /decisions will use the decision index/)
    const explicit = await cli('model', 'check', '--model', repositoryModel.pathname)
    t.equal(explicit.code, 0)

    const dir = tempDir(t, 'cli-model-')
    const reference = readFileSync(repositoryModel, 'utf8')
    const write = (name: string, text: string) => {
      writeFileSync(join(dir, name), text)
      return join(dir, name)
    }
    const allowOnly = write('allow-only.conf', reference.replace(/^e = .*$/m, 'e = some(where (p.eft == allow))'))
    const other = await cli('model', 'check', '--model', allowOnly)
    t.equal(other.code, 0, 'a different but valid model passes')
    t.match(other.out, /differs from the one the decision index implements/)

    const broken: Array<[string, string, RegExp]> = [
      ['missing sections', '[request_definition]\nr = sub, obj\n', /the Casbin model does not parse|the model needs/],
      ['three request fields', reference.replace('r = sub, dom, obj, act', 'r = sub, obj, act'), /r = sub, dom, obj, act/],
      ['unknown function in the matcher', reference.replace('r.act == p.act &&', 'r.act == p.act && nosuch(r.sub) &&'), /cannot evaluate/],
      ['unclosed parenthesis', reference.replace('r.act == p.act &&', 'r.act == p.act && (('), /cannot evaluate/],
      ['unknown effect', reference.replace(/^e = .*$/m, 'e = whatever(p.eft)'), /cannot evaluate.*unsupported effect/],
    ]
    for (const [name, text, message] of broken) {
      const result = await cli('model', 'check', '--model', write(`${name.replace(/\W+/g, '-')}.conf`, text))
      t.equal(result.code, 1, `${name}: exit 1`)
      t.match(result.err, message, name)
      t.equal(result.err.split('\n').length, 1, `${name}: one line`)
      t.notMatch(result.err, STACK_FRAME, `${name}: no stack trace`)
      t.equal(result.out, '', `${name}: nothing claims success`)
    }
    const missing = await cli('model', 'check', '--model', join(dir, 'nope.conf'))
    t.equal(missing.code, 1)
    t.match(missing.err, /cannot read the Casbin model at .*nope\.conf/)
    t.equal((await cli('model', 'check', '--modle', 'x')).code, 2, 'a misspelt option')
    t.equal((await cli('model')).code, 2, 'model without check')
  })

  t.test('audit verify', async (t) => {
    const verified = await cli('audit', 'verify')
    t.equal(verified.code, 0, verified.err)
    t.match(verified.out, /the audit trail is whole: \d+ rows verified/)
    await db.transaction(async (tx) => {
      await tx.query('ALTER TABLE permission_audit DISABLE TRIGGER USER')
      await tx.query("UPDATE permission_audit SET ip = '6.6.6.6' WHERE id = (SELECT min(id) + 2 FROM permission_audit)")
      await tx.query('ALTER TABLE permission_audit ENABLE TRIGGER USER')
    })
    const tampered = await cli('audit', 'verify')
    t.equal(tampered.code, 1)
    t.match(tampered.err, /was edited/)
  })

  t.test('usage', async (t) => {
    for (const argv of [['frobnicate'], [], ['bootstrap', 'extra'], ['migrate', '--force'], ['audit']]) {
      const result = await cli(...argv)
      t.equal(result.code, 2, `${JSON.stringify(argv)}: exit 2`)
      t.match(result.err, /usage: admin-permission-service/, 'usage on stderr')
      t.equal(result.out, '')
    }
    for (const argv of [['--help'], ['-h'], ['help'], ['token', '--help'], ['model', 'check', '--help']]) {
      const result = await cli(...argv)
      t.equal(result.code, 0, `${JSON.stringify(argv)}: exit 0`)
      t.match(result.out, /usage: admin-permission-service/)
      t.match(result.out, /onboard-merchant --merchant-id M/)
    }
  })
})

t.test('configuration errors and key modes', async (t) => {
  const bad = await cliFor({ DATABASE_URL: 'mysql://x' })('migrate')
  t.equal(bad.code, 1)
  t.match(bad.err, /DATABASE_URL must start with postgres:\/\/, postgresql:\/\/ or pglite:\/\//)
  const port = await cliFor({ DATABASE_URL: 'pglite://memory', PORT: 'eighty' })('migrate')
  t.equal(port.code, 1)
  t.match(port.err, /PORT/)

  const external = await cliFor({ DATABASE_URL: 'pglite://memory', JWT_JWKS_URL: 'https://issuer.example/jwks.json' })('token', '--email', 'a@b.example')
  t.equal(external.code, 1)
  t.match(external.err, /token needs JWT_SECRET: with JWT_PUBLIC_KEY or JWT_JWKS_URL/)
  const throwaway = await cliFor({ DATABASE_URL: 'pglite://memory' })('token', '--email', 'a@b.example')
  t.equal(throwaway.code, 1)
  t.match(throwaway.err, /pglite:\/\/memory the generated key dies with this process/)

  const unreachable = await cliFor({ DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none', JWT_SECRET: TEST_SECRET })('migrate')
  t.equal(unreachable.code, 1)
  t.match(unreachable.err, /^failed: the database is unavailable: .*ECONNREFUSED/)
  t.notMatch(unreachable.err, STACK_FRAME)
})

t.test('a store in a folder: each command opens and closes it', { skip: pgliteRunOnly('an embedded store in a folder of its own, whatever DATABASE_URL says') }, async (t) => {
  const dir = tempDir(t, 'cli-store-')
  const cli = cliFor({ DATABASE_URL: `pglite://${dir}`, LOG_LEVEL: 'silent' })
  t.equal((await cli('migrate')).code, 0)
  t.equal((await cli('bootstrap', '--email', ROOT_EMAIL, '--password', 'root-password-1')).code, 0)
  const again = await cli('bootstrap', '--email', ROOT_EMAIL, '--password', 'root-password-1')
  t.match(again.out, /already exists/)
  t.equal((await cli('onboard-merchant', '--merchant-id', 'm-1', '--email', 'owner@m1.example', '--password', 'owner-pass-1')).code, 0)
  const token = await cli('token', '--email', ROOT_EMAIL)
  t.equal(token.code, 0, token.err)
  // No JWT_SECRET: the key generated for this store, kept in its folder, signs the token.
  const secret = readFileSync(join(dir, 'jwt-secret'), 'utf8').trim()
  t.equal((createVerifier({ key: secret })(token.out) as { principal_type: string }).principal_type, 'system_owner')
  t.match((await cli('model', 'check')).out, /0 p rules \(overrides included\), 2 g rules/)

  const db = await openPGlite(dir)
  t.teardown(() => db.close())
  t.equal(await systemSuperAdmins(db), 1)
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM admin_accounts')
  t.equal(rows[0]?.n, 2, 'no random first admin: only what the commands created')
})

t.test('the commands that only open the database need no JWT setting', async (t) => {
  // PostgreSQL: the whole configuration insists on a key; migrate, audit verify and model check read only the database's.
  const store = await processDatabase(t)
  const cli = cliFor({ DATABASE_URL: store.url, LOG_LEVEL: 'silent' })
  const migrated = await cli('migrate')
  t.same(migrated, { code: 0, out: `applied ${allMigrations.join(', ')}`, err: '' }, `migrate without JWT_SECRET (${store.kind})`)
  const verified = await cli('audit', 'verify')
  t.equal(verified.code, 0, verified.err)
  const checked = await cli('model', 'check')
  t.equal(checked.code, 0, checked.err)
  if (store.kind === 'pglite') t.notOk(existsSync(join(store.dir ?? '', 'jwt-secret')), 'and no key is generated for them')
  if (store.kind === 'postgres') {
    const token = await cli('token', '--email', ROOT_EMAIL)
    t.same(token, { code: 1, out: '', err: 'with DATABASE_URL=postgres://… set JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL' }, 'a command that signs tokens still asks for the key')
  }
  const bad = await cliFor({ DATABASE_URL: store.url, DB_POOL_MAX: 'many' })('migrate')
  t.equal(bad.code, 1, 'the environment is checked as the server checks it')
  t.match(bad.err, /DB_POOL_MAX/)
})

t.test('ttl parsing', async (t) => {
  t.equal(parseTtl('90'), 90)
  t.equal(parseTtl('45s'), 45)
  t.equal(parseTtl('30m'), 1800)
  t.equal(parseTtl('1h'), 3600)
  t.equal(parseTtl('2d'), 172800)
  t.equal(parseTtl('365d'), 365 * 86400)
  for (const bad of ['0', '0h', '1w', '1.5h', 'h', '', '-1', '366d', '99999999999']) t.throws(() => parseTtl(bad), bad)
})

t.test('the real command line, as a child process', { skip: pgliteRunOnly('an embedded store in a folder of its own, whatever DATABASE_URL says') }, async (t) => {
  const dir = tempDir(t, 'cli-process-')
  const cwd = new URL('..', import.meta.url).pathname
  const env = { ...process.env, DATABASE_URL: `pglite://${dir}`, LOG_LEVEL: 'silent' }
  const main = (...args: string[]) => run(process.execPath, [...TEST_NODE_ARGS, 'src/cli/main.ts', ...args], { cwd, env, timeout: 60_000 })

  const migrated = await main('migrate')
  t.equal(migrated.stdout.trim(), `applied ${allMigrations.join(', ')}`)
  t.equal(migrated.stderr, '')
  t.match((await main('migrate')).stdout, /up to date/, 'the folder keeps the store between runs')

  const usage = await main('nonsense').then(
    () => null,
    (error: { code: number; stdout: string; stderr: string }) => error,
  )
  t.equal(usage?.code, 2, 'exit code 2')
  t.match(usage?.stderr, /unknown command: nonsense/)
  t.notMatch(usage?.stderr, STACK_FRAME)
})
