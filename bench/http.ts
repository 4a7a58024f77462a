/**
 * Load over HTTP for `npm run bench`: server processes of their own, load
 * from autocannon, and the server's CPU time read from /proc/<pid>/stat
 * (user + system), so the figure is the server's alone and costs the server
 * nothing to report.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import autocannon from 'autocannon'

/** Clock ticks per second of /proc's CPU times. */
const TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100

/** CPU time (user + system) of a process so far, in microseconds. */
export function processCpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name (field 2) may hold spaces: fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS
}

export interface Server {
  base: string
  token: string
  pid: number
  child: ChildProcess
  /** Stops the process and resolves once it has exited (a CPU profile is written on exit). */
  stop: () => Promise<void>
}

/**
 * Spawns `[launcher] node [nodeArgs] --import tsx <script> [args]` and waits for its `READY <port> <token>` on
 * stderr. A launcher (`taskset -c 1`, `setarch -R`) must exec node in its own process, so the pid read is node's.
 */
export async function spawnServer(
  script: string,
  args: string[],
  nodeArgs: string[] = [],
  env: NodeJS.ProcessEnv = process.env,
  launcher: readonly string[] = [],
): Promise<Server> {
  const path = new URL(script, import.meta.url).pathname
  const command = [...launcher, process.execPath, ...nodeArgs, '--import', 'tsx', path, ...args]
  const child = spawn(command[0] as string, command.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return new Promise((resolve, reject) => {
    let err = ''
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString()
      const match = /READY (\d+) (\S+)/.exec(err)
      if (match !== null && child.pid !== undefined) {
        err = ''
        resolve({
          base: `http://127.0.0.1:${match[1]}`,
          token: match[2] as string,
          pid: child.pid,
          child,
          stop: () => {
            child.kill('SIGTERM')
            return exited
          },
        })
      }
    })
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}: ${err.slice(-2000)}`)))
  })
}

/** One way of asking a server: a path, and the method, headers and body that go with it. */
export interface Target {
  name: string
  server: Server
  path: string
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  /** Decisions per request (check-batch answers many). */
  decisions?: number
  /** The status every answer must have. */
  status: number
}

export interface LoadRun {
  rps: number
  p50: number
  p99: number
  /** Server CPU time per request served, in microseconds. */
  cpuPerRequest: number
}

export async function load(target: Target, seconds: number, connections = 32): Promise<LoadRun> {
  const { server } = target
  const headers: Record<string, string> = { ...target.headers }
  if (server.token !== '-') headers.authorization = `Bearer ${server.token}`
  if (target.body !== undefined) headers['content-type'] = 'application/json'
  const before = processCpuMicros(server.pid)
  const result = await autocannon({
    url: `${server.base}${target.path}`,
    method: target.method ?? 'GET',
    headers,
    body: target.body,
    connections,
    pipelining: 1,
    duration: seconds,
    expectBody: undefined,
  })
  const after = processCpuMicros(server.pid)
  const wrong = result.requests.total - (result.statusCodeStats?.[String(target.status) as keyof typeof result.statusCodeStats]?.count ?? 0)
  if (wrong > 0 || result.errors > 0) throw new Error(`${target.name}: ${wrong} answers were not ${target.status} (${result.errors} errors)`)
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuPerRequest: (after - before) / Math.max(1, result.requests.total),
  }
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

/** A server process of one variant, started afresh each round, and what is asked of it. */
export interface Variant {
  start: () => Promise<Server>
  targets: Array<Omit<Target, 'server'>>
}

/**
 * Each round starts a fresh process of every variant (the yardstick's
 * included), warms each of its targets for `warmSeconds` (a fresh process
 * under load is still compiling its hot code a few seconds in), loads every
 * target once, the order rotating from round to round, and stops the
 * processes. Returns the runs per target (the variants' targets in order),
 * round by round. Two processes of the same code differ in CPU per request
 * by more than the changes being measured, so one process per variant for
 * the whole run would make every ratio a draw of two processes' luck: with a
 * fresh pair each round, the median over the rounds is over independent
 * pairs, and a ratio taken within a round still cancels the machine's drift
 * over seconds.
 */
export async function rounds(variants: Variant[], seconds: number, count: number, warmSeconds: number): Promise<LoadRun[][]> {
  const width = variants.reduce((n, v) => n + v.targets.length, 0)
  const runs: LoadRun[][] = Array.from({ length: width }, () => [])
  for (let round = 0; round < count; round++) {
    const servers: Server[] = []
    const started = performance.now()
    try {
      // Started together: a start is mostly seeding and compiling, and on a shared machine each process gets its own share.
      const starts = await Promise.allSettled(variants.map((variant) => variant.start()))
      for (const start of starts) if (start.status === 'fulfilled') servers.push(start.value)
      const failed = starts.find((start): start is PromiseRejectedResult => start.status === 'rejected')
      if (failed !== undefined) throw failed.reason
      process.stderr.write(`  round ${round + 1} of ${count}: ${servers.length} server processes started in ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
      const targets = variants.flatMap((variant, v) => variant.targets.map((target) => ({ ...target, server: servers[v] as Server })))
      for (const target of targets) await load(target, warmSeconds)
      for (let k = 0; k < width; k++) {
        const t = (round + k) % width
        ;(runs[t] as LoadRun[]).push(await load(targets[t] as Target, seconds))
      }
    } finally {
      for (const server of servers) await server.stop()
    }
  }
  return runs
}

/** A figure of `a` divided by the same of `b`, round by round. */
export const roundRatios = (a: LoadRun[], b: LoadRun[], figure: (run: LoadRun) => number): number[] => a.map((run, i) => figure(run) / figure(b[i] as LoadRun))
