import { execFile, spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { tempDir } from './helper.js'
import { freePort, repositoryRoot } from './support/serverProcess.js'
import { compiledDist } from './support/compiledBuild.js'
import { onceOnPGlite } from './support/onceOnPGlite.js'
import { COMPILE_CACHE_ENV, WASM_BASELINE_ONLY } from './support/nodeArgs.js'

onceOnPGlite('the image layout, started on pglite://memory whatever DATABASE_URL says')

/**
 * Docker does not run where the tests run, so the image is checked in two
 * halves: the Dockerfile is read for the properties the image must have, and
 * the compiled service is built and started from a folder laid out like the
 * image's /app (no src/, no tsx loader) to show that layout runs.
 */

const run = promisify(execFile)

interface Instruction {
  keyword: string
  args: string
  line: number
}

interface Stage {
  from: string
  name: string | undefined
  instructions: Instruction[]
}

/** Instructions with their continuation lines joined; comments and blank lines dropped. */
function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = []
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const start = i
    let current = (lines[i] ?? '').trim()
    if (current === '' || current.startsWith('#')) continue
    while (current.endsWith('\\') && i + 1 < lines.length) {
      i++
      const next = (lines[i] ?? '').trim()
      // Comment lines inside a continued instruction are dropped by Docker too.
      current = current.slice(0, -1).trimEnd() + (next.startsWith('#') ? ' \\' : ` ${next}`)
    }
    const match = /^(\S+)\s*(.*)$/s.exec(current)
    if (match === null) continue
    instructions.push({ keyword: (match[1] as string).toUpperCase(), args: (match[2] as string).trim(), line: start + 1 })
  }
  return instructions
}

function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = []
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const [from = '', as, name] = instruction.args.replace(/--platform=\S+\s*/, '').split(/\s+/)
      stages.push({ from, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] })
    } else {
      stages.at(-1)?.instructions.push(instruction)
    }
  }
  return stages
}

/** `COPY [--from=x] [--chown=…] a b dest`: the options and the sources. */
function copyParts(args: string): { from: string | undefined; sources: string[] } {
  const words = args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/)
  const options = words.filter((w) => w.startsWith('--'))
  const paths = words.filter((w) => !w.startsWith('--'))
  const from = options.find((o) => o.startsWith('--from='))?.slice('--from='.length)
  return { from, sources: paths.slice(0, -1) }
}

/** Node lines under long-term support as of this writing (22 until April 2027, 24 until April 2028, 26 from October 2026). */
const LTS_MAJORS = new Set([22, 24, 26])
const PINNED_NODE = /^node:(\d+)\.(\d+)\.(\d+)-(bookworm|trixie)-slim(@sha256:[0-9a-f]{64})?$/

/** Tools that build, test or load TypeScript: none belongs in the image's node_modules. */
const DEV_TOOLING = /^(tsx|esbuild|@esbuild\/.*|typescript|tap|@tapjs\/.*|eslint|@eslint\/.*|typescript-eslint|@typescript-eslint\/.*|dpdm|fast-check|autocannon|@types\/.*)$/

const dockerfile = readFileSync(join(repositoryRoot, 'Dockerfile'), 'utf8')
const stages = stagesOf(parseDockerfile(dockerfile))
const stageNamed = (name: string) => stages.find((s) => s.name === name)
const final = stages.at(-1) as Stage
const finalOf = (keyword: string) => final.instructions.filter((i) => i.keyword === keyword)

/** A stage and the stages it is built on, nearest first. */
function lineage(stage: Stage): Stage[] {
  const chain = [stage]
  for (let parent = stageNamed(stage.from); parent !== undefined; parent = stageNamed(parent.from)) chain.push(parent)
  return chain
}

t.test('the base image is a current LTS Node, pinned by full version', async (t) => {
  const external = stages.filter((s) => stageNamed(s.from) === undefined)
  t.ok(external.length > 0, 'at least one stage starts from an image')
  for (const stage of external) {
    const match = PINNED_NODE.exec(stage.from)
    t.ok(match, `${stage.from}: node:<major>.<minor>.<patch>-<debian>-slim`)
    if (match !== null) t.ok(LTS_MAJORS.has(Number(match[1])), `${stage.from}: Node ${match[1]} is an LTS line`)
  }
  t.equal(new Set(external.map((s) => s.from)).size, 1, 'every stage runs the same Node')
})

t.test('multi-stage: the image is built apart from the stage that runs it', async (t) => {
  t.ok(stages.length >= 2, `${stages.length} stages`)
  t.equal(stageNamed(final.from), undefined, 'the final stage starts from the base image, not from a stage holding the build tools')
  t.equal(finalOf('RUN').filter((i) => /\bnpm\b/.test(i.args)).length, 0, 'the final stage installs nothing')
})

t.test('the final stage runs the compiled service as a non-root user', async (t) => {
  const users = finalOf('USER')
  t.ok(users.length > 0, 'USER is set')
  const user = users.at(-1)?.args ?? ''
  t.notOk(/^(root|0)(:.*)?$/.test(user), `USER ${user} is not root`)
  const lastUser = users.at(-1)?.line ?? Infinity
  t.notOk(
    final.instructions.some((i) => i.keyword === 'RUN' && i.line > lastUser),
    'nothing runs after the switch to the unprivileged user (no RUN needs root there)',
  )
  t.same(JSON.parse(finalOf('CMD').at(-1)?.args ?? 'null'), ['node', 'dist/http/server.js'], 'CMD runs the compiled server with plain node')
  t.equal(finalOf('ENTRYPOINT').length, 0, 'no entrypoint wraps it (signals go straight to node)')
})

t.test('health check, stop signal and the data volume', async (t) => {
  const health = finalOf('HEALTHCHECK').at(-1)?.args ?? 'NONE'
  t.notMatch(health, /^NONE$/i, 'HEALTHCHECK is set')
  t.match(health, /\/healthz/, 'it asks /healthz')
  t.equal(finalOf('STOPSIGNAL').at(-1)?.args, 'SIGTERM', 'STOPSIGNAL SIGTERM (the server drains on it)')
  const volumes = finalOf('VOLUME').flatMap((v) => (v.args.startsWith('[') ? (JSON.parse(v.args) as string[]) : v.args.split(/\s+/)))
  t.ok(volumes.includes('/app/data'), 'VOLUME /app/data for the embedded store')
  t.same(finalOf('WORKDIR').map((w) => w.args), ['/app'], 'the service runs in /app, so ./data is the volume')
  const volumeLine = finalOf('VOLUME').at(-1)?.line ?? 0
  t.notOk(
    final.instructions.some((i) => i.keyword === 'RUN' && i.line > volumeLine && /\/app\/data|\bdata\b/.test(i.args)),
    'nothing prepares data/ after VOLUME (Docker would discard it)',
  )
})

t.test('no source and no dev tooling in the final stage', async (t) => {
  for (const copy of [...finalOf('COPY'), ...finalOf('ADD')]) {
    const { from, sources } = copyParts(copy.args)
    for (const source of sources) {
      t.notMatch(source, /(^|\/)(src|test|bench)(\/|$)/, `line ${copy.line}: ${source} is not source code`)
      t.notMatch(source, /tsconfig|\.ts$/, `line ${copy.line}: ${source} is not a TypeScript input`)
    }
    if (from !== undefined && sources.some((s) => s.endsWith('node_modules'))) {
      const chain = lineage(stageNamed(from) as Stage)
      const runs = chain.flatMap((s) => s.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args))
      t.ok(
        runs.some((r) => /\bnpm (prune|ci)\b[^&;]*--omit=dev/.test(r)),
        `node_modules comes from stage ${from}, which leaves out the dev dependencies`,
      )
    }
  }
  const fromStages = finalOf('COPY').flatMap((c) => {
    const { from, sources } = copyParts(c.args)
    return from === undefined ? [] : sources
  })
  t.same(fromStages.filter((s) => !/\/(dist|node_modules)$/.test(s)), [], 'only dist/ and node_modules come from other stages')
})

/**
 * What `npm ci` followed by the runtime stage's own steps leaves in
 * node_modules, worked out from package-lock.json the way npm resolves it:
 * every package reachable from package.json's dependencies (less those the
 * stage deletes from the manifest) through dependency, optional and peer
 * edges that the lockfile resolves (npm keeps an optional peer it finds
 * installed, which is how TypeScript survives --omit=dev), less the folders
 * the stage removes.
 */
t.test('the runtime node_modules, from the lockfile, holds no dev tooling', async (t) => {
  const copy = finalOf('COPY').map((c) => copyParts(c.args)).find((c) => c.sources.some((s) => s.endsWith('node_modules')))
  const source = stageNamed(copy?.from ?? '')
  if (source === undefined) return t.fail('node_modules is copied from a stage of this Dockerfile')
  const chain = lineage(source)
  const runs = chain.flatMap((s) => s.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args)).join(' && ')
  const deleted = [...runs.matchAll(/npm pkg delete((?:\s+dependencies\.[^\s&;]+)+)/g)].flatMap((m) =>
    (m[1] as string).trim().split(/\s+/).map((d) => d.slice('dependencies.'.length)),
  )
  const removed = [...runs.matchAll(/rm -rf((?:\s+[^\s&;]+)+)/g)].flatMap((m) => (m[1] as string).trim().split(/\s+/))

  type LockEntry = { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string>; peerDependencies?: Record<string, string>; dev?: boolean }
  const lock = JSON.parse(readFileSync(join(repositoryRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }
  const manifest = JSON.parse(readFileSync(join(repositoryRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  const resolveFrom = (parent: string, name: string): string | undefined => {
    for (let base = parent; ; base = base.slice(0, Math.max(0, base.lastIndexOf('/node_modules/')))) {
      const candidate = base === '' ? `node_modules/${name}` : `${base}/node_modules/${name}`
      if (lock.packages[candidate] !== undefined) return candidate
      if (base === '') return undefined
    }
  }
  const kept = new Set<string>()
  const visit = (path: string) => {
    if (kept.has(path)) return
    kept.add(path)
    const entry = lock.packages[path] ?? {}
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies, ...entry.peerDependencies })) {
      const target = resolveFrom(path, name)
      if (target !== undefined) visit(target)
    }
  }
  for (const name of Object.keys(manifest.dependencies).filter((n) => !deleted.includes(n))) {
    const target = resolveFrom('', name)
    t.ok(target, `${name} is in the lockfile`)
    if (target !== undefined) visit(target)
  }
  const installed = [...kept].filter((path) => !removed.some((r) => path === r || path.startsWith(`${r}/`)))
  const packageName = (path: string) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)
  const tooling = installed.map(packageName).filter((name) => DEV_TOOLING.test(name))
  t.same(tooling, [], 'no TypeScript loader, compiler, bundler, linter or test runner')
  if ('tsx' in manifest.dependencies) t.ok(deleted.includes('tsx'), 'tsx (kept in dependencies for npm start) is taken out of the image')
  for (const needed of ['fastify', 'casbin', 'pg', '@electric-sql/pglite', 'i18next', '@node-rs/argon2']) {
    t.ok(installed.includes(`node_modules/${needed}`), `${needed} stays`)
  }
})

t.test('.dockerignore keeps the build inputs and drops local state', async (t) => {
  const ignored = readFileSync(join(repositoryRoot, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
  for (const local of ['node_modules', 'dist', 'data', '.git']) t.ok(ignored.includes(local), `${local} is not sent to the builder`)
  const used = stages.flatMap((s) => s.instructions.filter((i) => i.keyword === 'COPY' && copyParts(i.args).from === undefined))
  for (const source of used.flatMap((c) => copyParts(c.args).sources)) {
    t.notOk(ignored.includes(source.replace(/^\.\//, '').replace(/\/.*$/, '')), `${source} reaches the builder`)
  }
})

/**
 * The image's /app, built here: `npm run build`'s dist/ (compiledDist) in a folder with only what
 * the final stage copies (package.json, dist/, sql/, console/, model.conf, model.decisions) and the
 * repository's node_modules linked in. Started with plain node, it must
 * answer health checks and localise its errors from the copied locale files.
 */
t.test('the compiled service runs without src/', { timeout: 170_000 }, async (t) => {
  const app = join(tempDir(t, 'aps-image-'), 'app')
  mkdirSync(app)
  await compiledDist(join(app, 'dist'))
  for (const file of ['http/server.js', 'cli/main.js', 'i18n/index.js', 'i18n/en.json', 'i18n/es.json']) {
    t.ok(existsSync(join(app, 'dist', file)), `dist/${file} is built`)
  }
  cpSync(join(repositoryRoot, 'package.json'), join(app, 'package.json'))
  cpSync(join(repositoryRoot, 'model.conf'), join(app, 'model.conf'))
  cpSync(join(repositoryRoot, 'model.decisions'), join(app, 'model.decisions'))
  cpSync(join(repositoryRoot, 'sql'), join(app, 'sql'), { recursive: true })
  cpSync(join(repositoryRoot, 'console'), join(app, 'console'), { recursive: true })
  symlinkSync(join(repositoryRoot, 'node_modules'), join(app, 'node_modules'), 'dir')
  t.notOk(existsSync(join(app, 'src')), 'no src/ beside dist/')

  const port = await freePort()
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', DATABASE_URL: 'pglite://memory', HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', ...COMPILE_CACHE_ENV }
  const child = spawn(process.execPath, [WASM_BASELINE_ONLY, 'dist/http/server.js'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      process.kill(-child.pid, 'SIGKILL')
      await exited
    }
  })

  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  let health: Response | undefined
  while (health?.status !== 200 && Date.now() < deadline) {
    if (child.exitCode !== null) break
    health = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined)
    if (health?.status !== 200) await new Promise((resolve) => setTimeout(resolve, 200))
  }
  t.equal(health?.status, 200, '/healthz answers 200', { output })

  const messages = (locale: string) =>
    JSON.parse(readFileSync(join(app, 'dist', 'i18n', `${locale}.json`), 'utf8')) as { errors: Record<string, string> }
  const [es, en] = [messages('es'), messages('en')]
  const denied = await fetch(`${base}/v2/profile?lang=es`)
  t.equal(denied.status, 401)
  const body = (await denied.json()) as { response_code: string; response_text: string }
  t.equal(body.response_code, '200')
  t.equal(body.response_text, es.errors.UNAUTHENTICATED, 'the Spanish text, read from dist/')
  t.not(body.response_text, en.errors.UNAUTHENTICATED)

  child.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM stops it cleanly')

  const help = await run(process.execPath, ['dist/cli/main.js', '--help'], { cwd: app, env, timeout: 30_000 })
  t.match(help.stdout, /usage: admin-permission-service/, 'the compiled command line runs too')
})
