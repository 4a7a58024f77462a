import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Database } from '../../src/storage/db.js'
import { openPGlite } from '../../src/storage/pglite.js'
import { freshDatabase, postgresUrl } from '../helper.js'
import { TEST_NODE_ARGS } from './nodeArgs.js'

/**
 * The real server in processes of its own, for tests of what only a process
 * shows: signals, exit codes, start-up, sockets, logs. Several may run at
 * once (replicas on one PostgreSQL schema). Every process is started in a
 * process group of its own, so that stopping it also stops whatever it
 * started (npm → node → esbuild), and is killed with its group when the test
 * ends, whatever happened.
 */

export const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url))

interface Teardown {
  teardown(fn: () => unknown): void
}

/** A port nothing listens on right now: the kernel's pick for port 0, released at once. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** One line of a process's output: a pino log line as JSON, anything else as `{ text }`. */
export type LogLine = Record<string, unknown> & { level?: number; msg?: string; text?: string }

export const LOG_LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const

export function parseLogLines(output: string): LogLine[] {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        const parsed: unknown = JSON.parse(line)
        if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as LogLine
      } catch {
        // not JSON: kept as text below
      }
      return { text: line }
    })
}

/** A database that server processes can share with the test: a fresh schema on PostgreSQL, an embedded folder on PGlite. */
export interface ProcessDatabase {
  readonly kind: 'postgres' | 'pglite'
  /** DATABASE_URL for the processes; on PostgreSQL the schema travels in it as `options=-c search_path=<schema>`. */
  readonly url: string
  /** PostgreSQL only. */
  readonly schema?: string
  /** PGlite only. */
  readonly dir?: string
  /**
   * The test's own connection to the same data. On PGlite the folder belongs
   * to one process at a time: open it only once no server process holds it.
   */
  open(): Promise<Database>
}

export async function processDatabase(t: Teardown): Promise<ProcessDatabase> {
  if (postgresUrl === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'aps-process-'))
    let db: Database | null = null
    // One teardown, so the folder goes only after the test's own connection closed.
    t.teardown(async () => {
      await db?.close()
      rmSync(dir, { recursive: true, force: true })
    })
    return {
      kind: 'pglite',
      url: `pglite://${dir}`,
      dir,
      async open() {
        db ??= await openPGlite(dir)
        return db
      },
    }
  }
  const db = await freshDatabase(t)
  const schema = db.schema as string
  const url = new URL(postgresUrl)
  // node-postgres copies every query parameter of the URL into the connection settings (pg-connection-string),
  // and `options` goes to the server in the start-up message; URLSearchParams does the encoding.
  url.searchParams.set('options', `-c search_path=${schema}`)
  return { kind: 'postgres', url: url.toString(), schema, open: async () => db }
}

export interface ServerProcessOptions {
  /**
   * The process's environment on top of PATH, HOME, HOST=127.0.0.1, PORT (a
   * free port), LOG_LEVEL=info, APS_TEST_PGLITE_INITDB and NODE_COMPILE_CACHE; nothing else of the test's environment is
   * passed. `undefined` removes a variable.
   */
  env?: Record<string, string | undefined>
  /** `node` (default) runs `node --import tsx src/http/server.ts`; `npm` runs `npm start`, as the README's first command says. */
  via?: 'node' | 'npm'
  /** Wait until `/healthz` answers (default); false returns once the process is spawned. */
  waitUntilHealthy?: boolean
  /** For the wait until healthy (default 60 s). */
  startTimeoutMs?: number
  /** Shown in failure messages (default `server`). */
  name?: string
}

export interface ExitResult {
  code: number | null
  signal: NodeJS.Signals | null
  /** From the stop signal (from the spawn for `exited`) to the exit. */
  ms: number
  /** The stop's time ran out and the process group was killed. */
  killed: boolean
}

export interface ServerProcess {
  readonly name: string
  /** The spawned process (npm's own process with `via: 'npm'`); also its process group's id. */
  readonly pid: number
  readonly port: number
  /** `http://127.0.0.1:<port>` */
  readonly base: string
  readonly child: ChildProcess
  /** stdout and stderr, interleaved as they arrived. */
  output(): string
  stdout(): string
  stderr(): string
  /** The output's lines so far, pino's parsed. */
  logs(): LogLine[]
  /** The first line (so far or to come) that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>
  waitUntilHealthy(timeoutMs?: number): Promise<void>
  running(): boolean
  /** Settles when the process exits; `ms` counts from the spawn. */
  readonly exited: Promise<ExitResult>
  /**
   * Sends `signal` (default SIGTERM) to the process alone, as a supervisor
   * would, and waits for the exit; past `timeoutMs` (default 30 s) the group
   * is killed and the result says so.
   */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<ExitResult>
  /** SIGKILL to the process group. */
  kill(): void
  /** Whether any process of the group is still alive (the spawned one or anything it started). */
  groupAlive(): boolean
}

/** Process groups started here and not yet seen empty: killed when the test process goes, however it goes. */
const liveGroups = new Set<number>()

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL')
  } catch {
    // the group is empty already
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

let exitHooksInstalled = false
function installExitHooks(): void {
  if (exitHooksInstalled) return
  exitHooksInstalled = true
  process.on('exit', () => {
    for (const pgid of liveGroups) killGroup(pgid)
  })
  // The groups do not get the terminal's Ctrl-C; pass it on and then let the signal do what it would have done.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      for (const pgid of liveGroups) killGroup(pgid)
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, onSignal)
        process.kill(process.pid, signal)
      }
    }
    process.on(signal, onSignal)
  }
}

export async function startServer(t: Teardown, options: ServerProcessOptions = {}): Promise<ServerProcess> {
  installExitHooks()
  const name = options.name ?? 'server'
  const port = options.env?.PORT !== undefined ? Number(options.env.PORT) : await freePort()
  const env: Record<string, string> = {}
  const merged: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'info',
    // The tests' one initdb for the process's PGlite store (test/helper.ts); `undefined` in options.env gives it its own.
    APS_TEST_PGLITE_INITDB: process.env.APS_TEST_PGLITE_INITDB,
    // Node's compile cache, when the run has one (.ci/run): compiled code only, no behaviour.
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE,
    ...options.env,
  }
  for (const [key, value] of Object.entries(merged)) if (value !== undefined) env[key] = value

  const [command, args] =
    options.via === 'npm' ? ['npm', ['start']] : [process.execPath, [...TEST_NODE_ARGS, 'src/http/server.ts']]
  const spawnedAt = Date.now()
  const child = spawn(command, args, { cwd: repositoryRoot, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  if (child.pid === undefined) throw new Error(`${name}: could not spawn ${command}`)
  const pid = child.pid
  liveGroups.add(pid)

  let output = ''
  let stdout = ''
  let stderr = ''
  const waiters = new Set<() => void>()
  const onData = (stream: 'out' | 'err') => (chunk: Buffer) => {
    const text = chunk.toString()
    output += text
    if (stream === 'out') stdout += text
    else stderr += text
    for (const wake of waiters) wake()
  }
  child.stdout?.on('data', onData('out'))
  child.stderr?.on('data', onData('err'))

  const exited = new Promise<ExitResult>((resolve) => {
    child.once('exit', (code, signal) => {
      for (const wake of waiters) wake()
      resolve({ code, signal, ms: Date.now() - spawnedAt, killed: false })
    })
  })
  const running = () => child.exitCode === null && child.signalCode === null

  t.teardown(async () => {
    if (groupAlive(pid)) killGroup(pid)
    if (running()) await exited
    liveGroups.delete(pid)
  })

  const base = `http://127.0.0.1:${port}`
  const fail = (why: string) => new Error(`${name} (pid ${pid}): ${why}\n--- output ---\n${output}`)

  const waitForLog = (match: (line: LogLine) => boolean, timeoutMs = 30_000): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      let seen = 0
      const check = () => {
        const lines = parseLogLines(output)
        for (; seen < lines.length; seen++) {
          const line = lines[seen] as LogLine
          // The last line may still be arriving: read it once it ends.
          if (seen === lines.length - 1 && !output.endsWith('\n') && running()) break
          if (match(line)) return finish(() => resolve(line))
        }
        if (!running()) return finish(() => reject(fail('exited before the awaited log line')))
      }
      const timer = setTimeout(() => finish(() => reject(fail(`no awaited log line within ${timeoutMs} ms`))), timeoutMs)
      const finish = (settle: () => void) => {
        clearTimeout(timer)
        waiters.delete(check)
        settle()
      }
      waiters.add(check)
      check()
    })

  const waitUntilHealthy = async (timeoutMs = options.startTimeoutMs ?? 60_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      if (!running()) throw fail(`exited with ${child.exitCode ?? child.signalCode} before answering /healthz`)
      try {
        const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) })
        if (res.ok) return
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw fail(`/healthz did not answer within ${timeoutMs} ms`)
  }

  const server: ServerProcess = {
    name,
    pid,
    port,
    base,
    child,
    output: () => output,
    stdout: () => stdout,
    stderr: () => stderr,
    logs: () => parseLogLines(output),
    waitForLog,
    waitUntilHealthy,
    running,
    exited,
    async stop(signal = 'SIGTERM', timeoutMs = 30_000) {
      if (!running()) {
        const result = await exited
        return { ...result, ms: 0 }
      }
      const sentAt = Date.now()
      child.kill(signal)
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), timeoutMs)
      })
      const outcome = await Promise.race([exited, late])
      clearTimeout(timer)
      if (outcome === 'late') {
        killGroup(pid)
        const result = await exited
        return { ...result, ms: Date.now() - sentAt, killed: true }
      }
      return { ...outcome, ms: Date.now() - sentAt }
    },
    kill: () => killGroup(pid),
    groupAlive: () => groupAlive(pid),
  }

  if (options.waitUntilHealthy !== false) {
    try {
      await waitUntilHealthy()
    } catch (error) {
      killGroup(pid)
      throw error
    }
  }
  return server
}
