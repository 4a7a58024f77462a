import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import tap from 'tap'
import { runCli } from '../../src/cli/run.js'
import { LOCK_LOST_EXIT_CODE, STORE_LOCK_TIMING, openPGlite } from '../../src/storage/pglite.js'
import { currentLockOwner, lockOwnerIsGone } from '../../src/storage/lockOwner.js'
import { TEST_SECRET, tempDir } from '../helper.js'
import { startServer } from '../support/serverProcess.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { TEST_NODE_ARGS } from '../support/nodeArgs.js'

onceOnPGlite("PGlite's folder lock, on PGlite whatever DATABASE_URL says")

// PGlite does not lock its folder and two openers corrupt it; these run on PGlite whatever DATABASE_URL says.

const root = fileURLToPath(new URL('../..', import.meta.url))
const holderScript = fileURLToPath(new URL('../support/storeHolder.ts', import.meta.url))
/** Short enough to watch a lock go stale in a test; the holder and every opener below use the same. */
const FAST = { staleMs: 4000, updateMs: 1000 }
const fastArgs = [String(FAST.staleMs), String(FAST.updateMs)]

/** `unshare` runs a command as PID 1 of a new PID namespace, like a container's entry point. */
const NAMESPACE = ['--pid', '--fork', '--kill-child', '--mount-proc']
const unshareWorks = spawnSync('unshare', [...NAMESPACE, 'true'], { stdio: 'ignore' }).status === 0

interface Teardown {
  teardown(fn: () => unknown): void
}

interface Child {
  process: ChildProcessWithoutNullStreams
  /** Resolves with the first stdout line matching `pattern`. */
  line(pattern: RegExp, timeoutMs?: number): Promise<string>
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>
}

/** Runs `node <TEST_NODE_ARGS> <args>`, as PID 1 of its own PID namespace when `namespace` is set. */
function node(t: Teardown, args: string[], options: { namespace?: boolean; env?: Record<string, string> } = {}): Child {
  const command = [process.execPath, ...TEST_NODE_ARGS, ...args]
  const [file, ...rest] = options.namespace === true ? ['unshare', ...NAMESPACE, ...command] : command
  const child = spawn(file as string, rest, { cwd: root, env: { ...process.env, ...options.env } })
  let out = ''
  let err = ''
  const onOutput = new Set<() => void>()
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
    for (const look of onOutput) look()
  })
  child.stderr.on('data', (chunk: Buffer) => void (err += chunk.toString()))
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((done) =>
    child.on('close', (code) => done({ code, stdout: out, stderr: err })),
  )
  t.teardown(() => {
    // Killing unshare kills its child too (--kill-child).
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return {
    process: child,
    exited,
    line(pattern, timeoutMs = 30_000) {
      return new Promise((found, fail) => {
        const finish = (outcome: () => void) => {
          clearTimeout(timer)
          onOutput.delete(look)
          outcome()
        }
        const look = () => {
          const hit = out.split('\n').find((l) => pattern.test(l))
          if (hit !== undefined) finish(() => found(hit))
        }
        const timer = setTimeout(() => finish(() => fail(new Error(`no line ${pattern} within ${timeoutMs} ms; stdout: ${out}; stderr: ${err}`))), timeoutMs)
        onOutput.add(look)
        look()
        void exited.then(() => {
          look()
          if (onOutput.has(look)) finish(() => fail(new Error(`exited without ${pattern}; stdout: ${out}; stderr: ${err}`)))
        })
      })
    },
  }
}

/** A new PGlite folder costs an initdb (seconds, more on a loaded machine): every test copies one made once. */
let template: Promise<string> | undefined
async function storeCopy(t: Teardown): Promise<string> {
  template ??= (async () => {
    const dir = join(tempDir(tap, 'aps-lock-template-'), 'store')
    await (await openPGlite(dir)).close()
    return dir
  })()
  const store = join(tempDir(t, 'aps-lock-'), 'store')
  cpSync(await template, store, { recursive: true })
  return store
}

interface OpenResult {
  pid: number
  opened: boolean
  rows?: number[] | null
  name?: string
  message?: string
}

/** One `open` attempt in a process of its own; returns what it printed. */
async function tryOpen(t: Teardown, store: string, namespace: boolean): Promise<OpenResult> {
  const child = node(t, [holderScript, 'open', store, ...fastArgs], { namespace })
  const result = JSON.parse(await child.line(/^\{/)) as OpenResult
  await child.exited
  return result
}

tap.test('one opener per folder in a process; closing releases it', async (t) => {
  const dir = await storeCopy(t)
  const db = await openPGlite(dir)
  t.ok(statSync(join(dir, 'aps.lock')).isDirectory(), 'the lock is a directory in the data folder')
  await t.rejects(openPGlite(dir), { name: 'StoreInUseError', message: /already open in this process/ })
  await db.query('CREATE TABLE kept (id int)')
  await db.close()
  t.notOk(existsSync(join(dir, 'aps.lock')), 'released on close')
  await db.close()
  const again = await openPGlite(dir)
  t.same((await again.query("SELECT to_regclass('kept') IS NOT NULL AS present")).rows, [{ present: true }], 'reopened with its data')
  await again.close()
})

tap.test('a lock nobody refreshes is taken over once stale, not before', async (t) => {
  const dir = await storeCopy(t)
  const lock = join(dir, 'aps.lock')
  mkdirSync(lock)
  const staleSeconds = STORE_LOCK_TIMING.staleMs / 1000
  await t.rejects(openPGlite(dir), {
    name: 'StoreInUseError',
    message: new RegExp(`the embedded store ${dir} is in use by another process .*refreshed [01] s ago.*taken over in (${staleSeconds}|${staleSeconds - 1}) s`),
  })
  const past = new Date(Date.now() - STORE_LOCK_TIMING.staleMs - 5000)
  utimesSync(lock, past, past)
  const db = await openPGlite(dir)
  t.ok(statSync(lock).mtimeMs > past.getTime(), 'taken over: the lock is fresh again')
  await db.close()
  t.notOk(existsSync(lock))
})

tap.test("the process-id file of an earlier version is not taken for this version's lock", async (t) => {
  const dir = tempDir(t, 'aps-lock-')
  writeFileSync(join(dir, 'aps.lock'), '4194999\n')
  await t.rejects(openPGlite(dir), { name: 'StoreInUseError', message: new RegExp(`the embedded store ${dir} holds ${join(dir, 'aps.lock')}, the lock file of an earlier version`) })
})

tap.test('another live process holding the folder stops the command line, and the store survives', async (t) => {
  const store = await storeCopy(t)
  const holder = node(t, [holderScript, 'hold', store])
  await holder.line(/^ready/)

  await t.rejects(openPGlite(store), { name: 'StoreInUseError', message: new RegExp(`the embedded store ${store} is in use by another process \\(a running server\\?\\)`) })
  const err: string[] = []
  const code = await runCli(['onboard-merchant', '--merchant-id', 'm-1', '--email', 'o@m1.example', '--password', 'owner-pass-1'], {
    env: { DATABASE_URL: `pglite://${store}` },
    io: { out: () => undefined, err: (l) => void err.push(l) },
  })
  t.equal(code, 1, 'the command fails instead of writing beside the server')
  t.match(err.join('\n'), `the embedded store ${store} is in use by another process`)

  holder.process.kill('SIGTERM')
  t.equal((await holder.exited).code, 0)
  t.notOk(existsSync(join(store, 'aps.lock')), 'the holder released it')
  const db = await openPGlite(store)
  t.same((await db.query('SELECT n FROM held')).rows, [{ n: 1 }], 'the data of the holder is intact')
  t.same((await db.query("SELECT to_regclass('merchants') IS NULL AS untouched")).rows, [{ untouched: true }], 'nothing was written by the refused command')
  await db.close()
})

tap.test('two processes that are both PID 1, each in its own PID namespace', { skip: unshareWorks ? false : 'unshare --pid --fork --mount-proc is not available here (util-linux, and root or user namespaces)' }, async (t) => {
  const store = await storeCopy(t)
  const holder = node(t, [holderScript, 'hold', store, ...fastArgs], { namespace: true })
  t.equal(await holder.line(/^ready/), 'ready 1', 'the holder is PID 1 in its namespace')

  const cli = node(t, ['src/cli/main.ts', 'onboard-merchant', '--merchant-id', 'm-1', '--email', 'o@m1.example', '--password', 'owner-pass-1'], {
    namespace: true,
    env: { DATABASE_URL: `pglite://${store}`, LOG_LEVEL: 'silent' },
  })
  const [second, cliEnd] = await Promise.all([tryOpen(t, store, true), cli.exited])
  t.equal(second.pid, 1, 'so is a second opener')
  t.equal(second.opened, false, 'and it is refused')
  t.equal(second.name, 'StoreInUseError')
  t.match(second.message, `the embedded store ${store} is in use by another process`)
  t.equal(cliEnd.code, 1, 'the command line as PID 1 beside it fails')
  t.match(cliEnd.stderr, `the embedded store ${store} is in use by another process`)

  // Longer than the stale time: the live holder's refreshes keep its lock.
  await sleep(FAST.staleMs + 500)
  await t.rejects(openPGlite(store, { lock: FAST }), { name: 'StoreInUseError' }, 'a live holder keeps its lock past the stale time')
  holder.process.stdin.write('write\n')
  t.equal(await holder.line(/^written/), 'written 2', 'the holder is still writing: an acknowledged write')

  holder.process.kill('SIGKILL')
  await holder.exited
  const lock = join(store, 'aps.lock')
  t.ok(existsSync(lock), 'SIGKILL leaves the lock behind')
  await t.rejects(openPGlite(store, { lock: FAST }), { name: 'StoreInUseError' }, 'refused while the left lock is younger than the stale time')

  await sleep(Math.max(0, statSync(lock).mtimeMs + FAST.staleMs + 300 - Date.now()))
  const taken = await tryOpen(t, store, true)
  t.equal(taken.opened, true, "the dead holder's lock is taken over after the stale time")
  t.equal(taken.pid, 1, 'by a PID 1 again')
  t.same(taken.rows, [1, 2], 'with every write the holder acknowledged')
})

tap.test('a holder whose lock is taken over stops at once, writing nothing more', async (t) => {
  t.test('noticed by the refresh: the lock was touched by someone else', async (t) => {
    const store = await storeCopy(t)
    const holder = node(t, [holderScript, 'hold', store, ...fastArgs])
    await holder.line(/^ready/)
    // What a taker does to the lock in effect: its mtime is no longer the holder's.
    const past = new Date(Date.now() - 60_000)
    utimesSync(join(store, 'aps.lock'), past, past)
    const end = await holder.exited
    t.equal(end.code, LOCK_LOST_EXIT_CODE, `exit code ${LOCK_LOST_EXIT_CODE}`)
    t.match(end.stderr, `FATAL: the lock on the embedded store ${store} was lost`)
    t.ok(existsSync(join(store, 'aps.lock')), 'the lock, no longer its own, is left alone')
  })

  t.test('noticed before a write: the owner file names another process', async (t) => {
    const store = await storeCopy(t)
    const holder = node(t, [holderScript, 'hold', store, ...fastArgs])
    await holder.line(/^ready/)
    writeFileSync(join(store, 'aps.lock.owner'), 'another-holder')
    // Past the refresh interval the next statement reads the owner file first.
    await sleep(FAST.updateMs + 200)
    holder.process.stdin.write('write\n')
    const end = await holder.exited
    t.equal(end.code, LOCK_LOST_EXIT_CODE)
    t.match(end.stderr, /no longer names this process/)
    t.notMatch(end.stdout, /written/, 'the write was not made')
    t.ok(existsSync(join(store, 'aps.lock')), 'the lock is left to its new owner')

    // Standing in for the new owner: release its lock and look at the data.
    utimesSync(join(store, 'aps.lock'), new Date(0), new Date(0))
    const db = await openPGlite(store, { lock: FAST })
    t.same((await db.query('SELECT n FROM held')).rows, [{ n: 1 }], 'only the acknowledged row is there')
    await db.close()
  })
})

tap.test('a server killed with SIGKILL on this machine: a restart on its folder takes the lock at once', async (t) => {
  const store = await storeCopy(t)
  const lock = join(store, 'aps.lock')
  const env = { DATABASE_URL: `pglite://${store}`, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'warn', BOOTSTRAP_ADMIN_EMAIL: 'root@example.com', BOOTSTRAP_ADMIN_PASSWORD: 'root-password-123' }
  const first = await startServer(t, { env, name: 'first server' })
  first.kill()
  t.equal((await first.exited).signal, 'SIGKILL')
  t.ok(existsSync(lock), 'SIGKILL leaves the lock behind')
  const staleAt = statSync(lock).mtimeMs + STORE_LOCK_TIMING.staleMs

  const restarted = Date.now()
  const second = await startServer(t, { env, name: 'restarted server' })
  const ready = Date.now()
  t.ok(ready < staleAt, `ready ${((ready - restarted) / 1000).toFixed(1)} s after the restart, before the dead lock went stale`)
  t.equal((await fetch(`${second.base}/readyz`)).status, 200, 'and serving')
  const login = await fetch(`${second.base}/v2/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: 'login', data: { email: 'root@example.com', password: 'root-password-123' } }),
  })
  t.equal(login.status, 200, 'with the store the killed server wrote')
  await t.rejects(openPGlite(store), { name: 'StoreInUseError' }, 'the restarted server holds the lock: a live holder is never taken over')
  t.equal((await second.stop()).code, 0)
})

tap.test('which lock holders are provably gone', async (t) => {
  const here = currentLockOwner()
  t.notOk(lockOwnerIsGone(here, here), 'this process is alive')
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
  const gone = { ...here, pid: Number(dead.stdout) }
  t.ok(lockOwnerIsGone(gone, here), 'a process id no process has: gone')
  t.ok(lockOwnerIsGone({ ...here, pid: 1, started: 'never' }, here), 'a live process that started at another time: the id was reused')
  t.notOk(lockOwnerIsGone({ ...gone, host: 'another-host' }, here), 'another host name (another container): wait for the stale time')
  t.notOk(lockOwnerIsGone({ ...gone, pidNamespace: 'pid:[1]' }, here), 'another PID namespace: wait')
  t.notOk(lockOwnerIsGone({ ...gone, boot: 'another-boot' }, here), 'another boot of the machine (a shared volume): wait')
  t.notOk(lockOwnerIsGone({ ...gone, started: null }, here), 'a holder that could not read its start time: wait')
})
