/**
 * `policy import --file /dev/stdin`: the size cap is counted while reading,
 * so a pipe (whose size nobody knows beforehand) is refused as soon as it
 * passes the cap, and a policy under it is read.
 */
import { spawn } from 'node:child_process'
import t from 'tap'
import { repositoryRoot } from '../support/serverProcess.js'
import { tempDir } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { COMPILE_CACHE_ENV, TEST_NODE_ARGS } from '../support/nodeArgs.js'
import { MAX_POLICY_FILE_BYTES } from '../../src/commands/importPolicy.js'

onceOnPGlite('an embedded store in a folder of its own, whatever DATABASE_URL says')

t.test('the size cap holds while reading: a pipe is read no further than one byte past it', async (t) => {
  const dir = tempDir(t)
  // An endless pipe (`yes`): a cap checked against the file's size (a pipe has none) would read until memory runs out.
  const command = `yes '# a comment line that Casbin skips' | exec "${process.execPath}" ${TEST_NODE_ARGS.join(' ')} src/cli/main.ts policy import --file /dev/stdin --dry-run`
  const child = spawn('bash', ['-c', command], {
    cwd: repositoryRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, APS_TEST_PGLITE_INITDB: process.env.APS_TEST_PGLITE_INITDB, DATABASE_URL: `pglite://${dir}/store`, LOG_LEVEL: 'silent', ...COMPILE_CACHE_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  const group = child.pid as number
  const killGroup = () => {
    try {
      process.kill(-group, 'SIGKILL')
    } catch {
      // the group has gone
    }
  }
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()))
  child.stdout.resume()
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const timer = setTimeout(killGroup, 90_000)
  t.teardown(() => {
    clearTimeout(timer)
    killGroup()
  })
  const code = await exited
  t.equal(code, 2, stderr)
  t.equal(stderr, `/dev/stdin holds more than ${MAX_POLICY_FILE_BYTES} bytes; a policy file may have at most ${MAX_POLICY_FILE_BYTES}\n`)

  const small = spawn('bash', ['-c', `printf '# policy-format: 1\\n# scope: all\\np, clerk, global, orders, read, allow\\n' | exec "${process.execPath}" ${TEST_NODE_ARGS.join(' ')} src/cli/main.ts policy import --file /dev/stdin --dry-run`], {
    cwd: repositoryRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, APS_TEST_PGLITE_INITDB: process.env.APS_TEST_PGLITE_INITDB, DATABASE_URL: `pglite://${dir}/store`, LOG_LEVEL: 'silent', ...COMPILE_CACHE_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  small.stdout.on('data', (chunk: Buffer) => void (out += chunk.toString()))
  small.stderr.resume()
  const smallCode = await new Promise<number | null>((resolve) => small.once('exit', (c) => resolve(c)))
  t.teardown(() => void small.kill('SIGKILL'))
  t.equal(smallCode, 0)
  t.match(out, /^\+ p, clerk, global, orders, read, allow\n1 change: 1 added/, 'a policy under the cap is read from the pipe')
})
