/**
 * A process that opens an embedded store, for the lock tests: run it with
 * `node --import tsx test/support/storeHolder.ts <mode> <folder> [staleMs updateMs]`,
 * possibly as PID 1 of its own PID namespace.
 *
 * - `hold`: opens the store, writes a row (acknowledged by printing
 *   `ready <pid>`), then on each `write` line on stdin writes one more row and
 *   prints `written <n>`; SIGTERM closes the store and exits 0.
 * - `open`: tries to open the store and prints one JSON line: its pid and
 *   either the rows of `held` or the error; then closes it and exits 0.
 */
import { createInterface } from 'node:readline'
import { openPGlite, type LockTiming } from '../../src/storage/pglite.js'

const [mode, folder, stale, update] = process.argv.slice(2)
if (folder === undefined || (mode !== 'hold' && mode !== 'open')) {
  process.stderr.write('usage: storeHolder.ts hold|open <folder> [staleMs updateMs]\n')
  process.exit(2)
}
const lock: LockTiming | undefined = stale !== undefined && update !== undefined ? { staleMs: Number(stale), updateMs: Number(update) } : undefined
const options = lock !== undefined ? { lock } : {}

if (mode === 'open') {
  try {
    const db = await openPGlite(folder, options)
    const present = await db.query<{ present: boolean }>("SELECT to_regclass('held') IS NOT NULL AS present")
    const rows = present.rows[0]?.present === true ? (await db.query<{ n: number }>('SELECT n FROM held ORDER BY n')).rows.map((r) => r.n) : null
    await db.close()
    process.stdout.write(`${JSON.stringify({ pid: process.pid, opened: true, rows })}\n`)
  } catch (error) {
    const { name, message } = error as Error
    process.stdout.write(`${JSON.stringify({ pid: process.pid, opened: false, name, message })}\n`)
  }
} else {
  const db = await openPGlite(folder, options)
  await db.exec('CREATE TABLE IF NOT EXISTS held (n int PRIMARY KEY)')
  let n = (await db.query<{ n: number }>('SELECT coalesce(max(n), 0) + 1 AS n FROM held')).rows[0]?.n ?? 1
  await db.query('INSERT INTO held VALUES ($1)', [n])
  // As PID 1 of a namespace the process has no default action for SIGTERM: this handler is what ends it.
  process.on('SIGTERM', () => {
    void db.close().then(() => process.exit(0))
  })
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line.trim() !== 'write') return
    n++
    void db.query('INSERT INTO held VALUES ($1)', [n]).then(() => process.stdout.write(`written ${n}\n`))
  })
  process.stdout.write(`ready ${process.pid}\n`)
}
