/**
 * The README's shell blocks run as printed:
 *
 *   - "Calling the API with curl", top to bottom under `bash -euo pipefail`,
 *     against a real server process on a free port with an in-memory store,
 *     given only the variables the block itself reads (BASE, PASSWORD);
 *   - the `npm run` lines of "Policy as a file", in a folder laid out like
 *     the repository (so the files they write land there), against a store
 *     with a policy in it.
 */
import { execFile } from 'node:child_process'
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { runCli } from '../src/cli/run.js'
import { TEST_SECRET, tempDir } from './helper.js'
import { processDatabase, repositoryRoot, startServer } from './support/serverProcess.js'

const run = promisify(execFile)
const readme = readFileSync(join(repositoryRoot, 'README.md'), 'utf8')

/** The first ```sh block after a heading. */
function shellBlock(heading: string): string {
  const at = readme.indexOf(`\n${heading}\n`)
  if (at < 0) throw new Error(`README has no heading ${heading}`)
  const open = readme.indexOf('```sh\n', at)
  const close = readme.indexOf('\n```\n', open)
  return readme.slice(open + '```sh\n'.length, close + 1)
}

interface Ran {
  code: number
  stdout: string
  stderr: string
}

const bash = (script: string, options: { cwd: string; env: Record<string, string | undefined>; timeout: number }): Promise<Ran> =>
  run('bash', ['-euo', 'pipefail', '-c', script], { ...options, maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  )

t.test('README "Calling the API with curl" runs top to bottom against a real server', async (t) => {
  const block = shellBlock('## Calling the API with curl')
  const calls = block.split('\n').filter((l) => /(^|\$\()curl /.test(l))
  t.ok(calls.length > 20, `${calls.length} curl calls`)
  t.same(calls.filter((l) => !l.includes('curl -fsS ')), [], 'every call fails on an error answer (curl -f)')

  const server = await startServer(t, { env: { DATABASE_URL: 'pglite://memory', LOG_LEVEL: 'warn' } })
  const first = await server.waitForLog((line) => /FIRST START: the system-owner super_admin admin@example\.com was created/.test(line.text ?? ''))
  const password = /with password (\S+)/.exec(first.text ?? '')?.[1]
  t.ok(password !== undefined, 'the first-start password is printed')

  const dir = tempDir(t, 'readme-curl-')
  const ran = await bash(block, { cwd: dir, env: { PATH: process.env.PATH, HOME: process.env.HOME, BASE: server.base, PASSWORD: password }, timeout: 120_000 })
  t.equal(ran.code, 0, `the block exits 0\n--- stderr ---\n${ran.stderr}`)
  // Every call whose answer is printed (not kept in a variable, not the CSV export) prints one success envelope.
  const printed = calls.filter((l) => l.startsWith('curl ') && !l.includes('/export')).length
  t.equal(ran.stdout.split('{"response_code":"001"').length - 1, printed, `${printed} answers printed, each a success`)
  t.notMatch(ran.stdout, /"response_code":"(?!001)/, 'no error answer')
  t.match(ran.stdout, /# policy-format: 1\n# scope: domain m-1001\n/, 'the export of step 11')
  t.match(ran.stdout, /# expires_at 2099-01-31T18:00:00\.000Z\np, [0-9a-f-]{36}, m-1001, payouts, approve, allow\n/, 'with the override that expires')
  t.match(ran.stdout, /"data":\{"allowed":false\}\}$/, 'the read-your-writes check, after a password change, with the fresh token')
})

t.test('README "Policy as a file": the export and import commands, as printed', async (t) => {
  const redirected = readme.split('\n').filter((l) => /npm run (?!-s )\S*.*cli --.*(\s>\s|\s\|\s)/.test(l))
  t.same(redirected, [], 'every npm run whose output is redirected or piped is run with -s')

  const lines = shellBlock('## Policy as a file')
    .split('\n')
    .filter((l) => l.startsWith('npm run '))
  t.equal(lines.length, 5, 'two exports and three imports')

  // A folder laid out like the repository: npm runs the script there, and the files land there.
  const dir = tempDir(t, 'readme-policy-')
  for (const name of ['package.json', 'node_modules', 'src', 'sql', 'model.conf', 'tsconfig.json']) symlinkSync(join(repositoryRoot, name), join(dir, name))
  const store = await processDatabase(t)
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: store.url, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' }

  const quiet = { out: () => undefined, err: (line: string) => void t.comment(line) }
  t.equal(await runCli(['onboard-merchant', '--merchant-id', 'm-1', '--email', 'owner@m-1.example', '--password', 'owner-pass-1'], { env, io: quiet }), 0)
  const seed = join(dir, 'seed.csv')
  writeFileSync(seed, '# policy-format: 1\n# scope: all\np, clerk, global, orders, read, allow\np, clerk, m-1, orders, refund, allow\n')
  t.equal(await runCli(['policy', 'import', '--file', seed], { env, io: quiet }), 0, 'a policy to export')

  const outputs: string[] = []
  for (const line of lines) {
    const ran = await bash(line, { cwd: dir, env, timeout: 120_000 })
    t.equal(ran.code, 0, `${line}\n--- stderr ---\n${ran.stderr}`)
    outputs.push(ran.stdout)
  }
  const whole = readFileSync(join(dir, 'policy.csv'), 'utf8')
  t.match(whole, /^# policy-format: 1\n# scope: all\np, clerk, global, orders, read, allow\np, clerk, m-1, orders, refund, allow\ng, /, 'policy.csv is the CSV alone, header first')
  t.match(readFileSync(join(dir, 'm-1.csv'), 'utf8'), /^# policy-format: 1\n# scope: domain m-1\np, clerk, global, orders, read, allow\np, clerk, m-1, orders, refund, allow\ng, /)
  t.same(
    outputs.slice(2),
    [
      'no change: the store already holds this policy\ndry run: nothing was written\n',
      'no change: the store already holds this policy\n',
      'no change: the store already holds this policy\n',
    ],
    'each import of what was exported changes nothing',
  )
})
