/**
 * npm run bench:spread -- [bare|check] [processes]: how far apart server
 * processes of the same code land in CPU per request, and which of the
 * things that differ from one process to the next (V8's string hash seed,
 * its random seed, the address layout, the core) explains it. For each
 * setting, `processes` servers are started one after another (the settings
 * taken in turn, so the machine's drift falls on all alike); each is warmed,
 * then loaded RUNS times: the spread within a process (run to run) against
 * the spread between processes says whether a process's luck is real.
 */
import { loadavg } from 'node:os'
import { load, median, spawnServer, type LoadRun, type Target } from './http.js'

const KIND = process.argv[2] ?? 'bare'
const PROCESSES = Number(process.argv[3] ?? 6)
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 2)
const RUNS = 3
const WARM_SECONDS = Number(process.env.BENCH_WARM_SECONDS ?? 4)
if (KIND !== 'bare' && KIND !== 'check') throw new Error('bench:spread: the server is bare or check')

interface Setting {
  name: string
  nodeArgs: string[]
  launcher: string[]
}
const settings: Setting[] = [
  { name: 'as production starts it', nodeArgs: [], launcher: [] },
  { name: '--hash-seed=42', nodeArgs: ['--hash-seed=42'], launcher: [] },
  { name: '--random-seed=42', nodeArgs: ['--random-seed=42'], launcher: [] },
  { name: 'setarch -R (the same address layout)', nodeArgs: [], launcher: ['setarch', '-R'] },
  { name: 'taskset -c 1 (one core)', nodeArgs: [], launcher: ['taskset', '-c', '1'] },
  { name: 'all four', nodeArgs: ['--hash-seed=42', '--random-seed=42'], launcher: ['setarch', '-R', 'taskset', '-c', '1'] },
]

/** One process's runs after its warm-up. */
async function oneProcess(setting: Setting): Promise<LoadRun[]> {
  const server =
    KIND === 'bare'
      ? await spawnServer('./bareFastify.ts', [], setting.nodeArgs, process.env, setting.launcher)
      : await spawnServer('./server.ts', ['1000'], setting.nodeArgs, process.env, setting.launcher)
  const target: Target =
    KIND === 'bare'
      ? { name: 'bare', server, path: '/bare', status: 200 }
      : { name: 'check', server, path: '/v2/authz/check?obj=orders&act=read', status: 200 }
  try {
    await load(target, WARM_SECONDS)
    const runs: LoadRun[] = []
    for (let r = 0; r < RUNS; r++) runs.push(await load(target, SECONDS))
    return runs
  } finally {
    await server.stop()
  }
}

const fmt = (n: number, digits = 1) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const load1 = () => fmt(loadavg()[0] as number)

const startLoad = load1()
const perSetting: number[][][] = settings.map(() => [])
for (let p = 0; p < PROCESSES; p++) {
  for (const [s, setting] of settings.entries()) {
    const runs = await oneProcess(setting)
    const cpu = runs.map((r) => r.cpuPerRequest)
    ;(perSetting[s] as number[][]).push(cpu)
    process.stderr.write(`  ${setting.name}, process ${p + 1}: ${cpu.map((c) => fmt(c)).join(' / ')} µs (load ${load1()})\n`)
  }
}

const lines = [
  `command: npm run bench:spread -- ${KIND} ${PROCESSES}`,
  `${KIND === 'bare' ? 'the bare Fastify route' : 'GET /v2/authz/check, 1,000 rules, PGlite'}; ${PROCESSES} processes per setting, each warmed ${WARM_SECONDS} s then loaded ${RUNS} × ${SECONDS} s (autocannon, 32 connections); load average ${startLoad} at the start, ${load1()} at the end`,
  '',
  '| setting | CPU µs per request, each process (median of its runs) | median | between processes: (max - min) / median | within a process: mean (max - min) / median of its runs |',
  '|---|---|---:|---:|---:|',
]
for (const [s, setting] of settings.entries()) {
  const processes = perSetting[s] as number[][]
  const each = processes.map(median)
  const mid = median(each)
  const within = processes.map((runs) => (Math.max(...runs) - Math.min(...runs)) / median(runs))
  lines.push(
    `| ${setting.name} | ${each.map((c) => fmt(c)).join(', ')} | ${fmt(mid)} | ${fmt(((Math.max(...each) - Math.min(...each)) / mid) * 100)}% | ${fmt((within.reduce((a, b) => a + b, 0) / within.length) * 100)}% |`,
  )
}
process.stdout.write(`${lines.join('\n')}\n`)
