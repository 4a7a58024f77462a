/**
 * "Calling the API with curl" in docs/getting-started.md runs as printed: top to bottom
 * under `bash -euo pipefail`, against a real server process on a free port
 * with an in-memory store, given only the variables the block itself reads
 * (BASE, PASSWORD).
 */
import t from 'tap'
import { tempDir } from './helper.js'
import { bash, shellBlock } from './support/readmeBlocks.js'
import { startServer } from './support/serverProcess.js'
import { onceOnPGlite } from './support/onceOnPGlite.js'
import { COMPILE_CACHE_ENV } from './support/nodeArgs.js'

onceOnPGlite("the README's blocks, run on pglite://memory whatever DATABASE_URL says")

t.test('docs/getting-started.md "Calling the API with curl" runs top to bottom against a real server', async (t) => {
  const block = shellBlock('## Calling the API with curl', 'docs/getting-started.md')
  const calls = block.split('\n').filter((l) => /(^|\$\()curl /.test(l))
  t.ok(calls.length > 20, `${calls.length} curl calls`)
  t.same(calls.filter((l) => !l.includes('curl -fsS ')), [], 'every call fails on an error answer (curl -f)')

  const server = await startServer(t, { env: { DATABASE_URL: 'pglite://memory', LOG_LEVEL: 'warn' } })
  const first = await server.waitForLog((line) => /FIRST START: the system-owner super_admin admin@example\.com was created/.test(line.text ?? ''))
  const password = /with password (\S+)/.exec(first.text ?? '')?.[1]
  t.ok(password !== undefined, 'the first-start password is printed')

  const dir = tempDir(t, 'readme-curl-')
  const ran = await bash(block, { cwd: dir, env: { PATH: process.env.PATH, HOME: process.env.HOME, BASE: server.base, PASSWORD: password, ...COMPILE_CACHE_ENV }, timeout: 120_000 })
  t.equal(ran.code, 0, `the block exits 0\n--- stderr ---\n${ran.stderr}`)
  // Every call whose answer is printed (not kept in a variable, not the CSV export) prints one success envelope.
  const printed = calls.filter((l) => l.startsWith('curl ') && !l.includes('/export')).length
  t.equal(ran.stdout.split('{"response_code":"001"').length - 1, printed, `${printed} answers printed, each a success`)
  t.notMatch(ran.stdout, /"response_code":"(?!001)/, 'no error answer')
  t.match(ran.stdout, /# policy-format: 1\n# scope: domain m-1001\n/, 'the export of step 11')
  t.match(ran.stdout, /# expires_at 2099-01-31T18:00:00\.000Z\np, [0-9a-f-]{36}, m-1001, payouts, approve, allow\n/, 'with the override that expires')
  t.match(ran.stdout, /"data":\{"allowed":false\}\}$/, 'the read-your-writes check, after a password change, with the fresh token')
})
