/**
 * The `npm run` lines of "Policy as a file" in docs/policy-and-model.md run
 * as printed, in a folder laid out like the repository (so the files they
 * write land there), against a store with a policy in it; and every
 * `npm run` whose output is redirected, in the README or any page of docs/,
 * is run with `-s` (npm's banner would land in the file).
 */
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { runCli } from '../src/cli/run.js'
import { TEST_SECRET, tempDir } from './helper.js'
import { bash, documentPaths, documentText, shellBlock } from './support/readmeBlocks.js'
import { processDatabase, repositoryRoot } from './support/serverProcess.js'
import { onceOnPGlite } from './support/onceOnPGlite.js'
import { COMPILE_CACHE_ENV } from './support/nodeArgs.js'

onceOnPGlite("the README's policy-file commands as printed")

t.test('docs/policy-and-model.md "Policy as a file": the export and import commands, as printed', async (t) => {
  const redirected = documentPaths().flatMap((path) =>
    documentText(path)
      .split('\n')
      .filter((l) => /npm run (?!-s )\S*.*cli --.*(\s>\s|\s\|\s)/.test(l))
      .map((l) => `${path}: ${l}`),
  )
  t.same(redirected, [], 'every npm run whose output is redirected or piped is run with -s')

  const lines = shellBlock('## Policy as a file', 'docs/policy-and-model.md')
    .split('\n')
    .filter((l) => l.startsWith('npm run '))
  t.equal(lines.length, 5, 'two exports and three imports')

  // A folder laid out like the repository: npm runs the script there, and the files land there.
  const dir = tempDir(t, 'readme-policy-')
  for (const name of ['package.json', 'node_modules', 'src', 'sql', 'model.conf', 'tsconfig.json']) symlinkSync(join(repositoryRoot, name), join(dir, name))
  const store = await processDatabase(t)
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, APS_TEST_PGLITE_INITDB: process.env.APS_TEST_PGLITE_INITDB, DATABASE_URL: store.url, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...COMPILE_CACHE_ENV }

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
