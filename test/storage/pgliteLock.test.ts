import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { runCli } from '../../src/cli/run.js'
import { openPGlite } from '../../src/storage/pglite.js'
import { tempDir } from '../helper.js'

// PGlite does not lock its folder and two openers corrupt it; these run on PGlite whatever DATABASE_URL says.

t.test('one opener per folder in a process; closing releases it', async (t) => {
  const dir = tempDir(t, 'aps-lock-')
  const db = await openPGlite(dir)
  t.equal(readFileSync(join(dir, 'aps.lock'), 'utf8').trim(), String(process.pid), 'the lock names this process')
  await t.rejects(openPGlite(dir), { name: 'StoreInUseError', message: /already open in this process/ })
  await db.query('CREATE TABLE kept (id int)')
  await db.close()
  t.notOk(existsSync(join(dir, 'aps.lock')), 'released on close')
  await db.close()
  const again = await openPGlite(dir)
  t.same((await again.query("SELECT to_regclass('kept') IS NOT NULL AS present")).rows, [{ present: true }], 'reopened with its data')
  await again.close()
})

t.test('a lock left by a dead process is taken over', async (t) => {
  const dir = tempDir(t, 'aps-lock-')
  mkdirSync(dir, { recursive: true })
  // The largest pid Linux hands out is 4194304: this one belongs to nobody.
  writeFileSync(join(dir, 'aps.lock'), '4194999\n')
  const db = await openPGlite(dir)
  t.equal(readFileSync(join(dir, 'aps.lock'), 'utf8').trim(), String(process.pid))
  await db.close()
  writeFileSync(join(dir, 'aps.lock'), 'garbage')
  const next = await openPGlite(dir)
  await next.close()
  t.pass('an unreadable lock counts as stale')
})

t.test('another live process holding the folder stops the command line, and the store survives', async (t) => {
  const dir = tempDir(t, 'aps-lock-')
  const store = join(dir, 'store')
  const holder = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '-e',
      `const { openPGlite } = await import('./src/storage/pglite.ts')
       const db = await openPGlite(${JSON.stringify(store)})
       await db.exec('CREATE TABLE held (id int); INSERT INTO held VALUES (1)')
       process.stdout.write('ready\\n')
       process.on('SIGTERM', async () => { await db.close(); process.exit(0) })
       setInterval(() => undefined, 1000)`,
    ],
    { cwd: new URL('../..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const exited = new Promise<number | null>((done) => holder.on('exit', (code) => done(code)))
  t.teardown(() => {
    if (holder.exitCode === null) holder.kill('SIGKILL')
  })
  await new Promise<void>((ready, fail) => {
    holder.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && ready())
    holder.on('exit', () => fail(new Error('the holder exited early')))
  })

  await t.rejects(openPGlite(store), { name: 'StoreInUseError', message: new RegExp(`in use by process ${holder.pid} \\(a running server\\?\\)`) })
  const err: string[] = []
  const code = await runCli(['onboard-merchant', '--merchant-id', 'm-1', '--email', 'o@m1.example', '--password', 'owner-pass-1'], {
    env: { DATABASE_URL: `pglite://${store}` },
    io: { out: () => undefined, err: (l) => void err.push(l) },
  })
  t.equal(code, 1, 'the command fails instead of writing beside the server')
  t.match(err.join('\n'), new RegExp(`in use by process ${holder.pid}`))

  holder.kill('SIGTERM')
  t.equal(await exited, 0)
  t.notOk(existsSync(join(store, 'aps.lock')), 'the holder released it')
  const db = await openPGlite(store)
  t.same((await db.query('SELECT id FROM held')).rows, [{ id: 1 }], 'the data of the holder is intact')
  t.same((await db.query("SELECT to_regclass('merchants') IS NULL AS untouched")).rows, [{ untouched: true }], 'nothing was written by the refused command')
  await db.close()
})
