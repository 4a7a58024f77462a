import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'
import t from 'tap'
import { onceOnPGlite } from './support/onceOnPGlite.js'

onceOnPGlite('the layer rule is read from the lint configuration; no database')

const root = fileURLToPath(new URL('../', import.meta.url))
const eslint = new ESLint({ cwd: root })
// The lint configuration is plain JavaScript; its table of layers is read as data.
const { LAYERS } = (await import(new URL('../eslint.config.js', import.meta.url).href)) as { LAYERS: Record<string, string[]> }

/** The layer-rule messages ESLint gives a file at `path` (relative to the repository) holding `code`. */
async function layerErrors(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${root}${path}` })
  return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message)
}

t.test('an import from a higher layer fails lint', async (t) => {
  const cases: Array<[file: string, code: string]> = [
    ['src/domain/probe.ts', "import { buildApp } from '../http/app.js'\nexport const x = buildApp\n"],
    ['src/domain/probe.ts', "import type { PermissionEngine } from '../engine/engine.js'\nexport type X = PermissionEngine\n"],
    ['src/storage/probe.ts', "export { applyChange } from '../engine/applyChange.js'\n"],
    ['src/engine/probe.ts', "import { WriteQueue } from '../commands/writeQueue.js'\nexport const x = WriteQueue\n"],
    ['src/commands/probe.ts', "import { buildService } from '../compose.js'\nexport const x = buildService\n"],
    ['src/cli/probe.ts', "import { createLocalizer } from '../http/i18n/index.js'\nexport const x = createLocalizer\n"],
    ['src/http/routes/probe.ts', "import { runCli } from '../../cli/run.js'\nexport const x = runCli\n"],
    ['src/compose.ts', "import { buildApp } from './http/app.js'\nexport const x = buildApp\n"],
    ['src/modelGate.ts', "import { runCli } from './cli/run.js'\nexport const x = runCli\n"],
    ['src/config.ts', "import { readModel } from './engine/model.js'\nexport const x = readModel\n"],
  ]
  for (const [file, code] of cases) {
    const errors = await layerErrors(file, code)
    t.equal(errors.length, 1, `${file}: ${code.split('\n')[0]}`)
  }
})

t.test('an import from the same or a lower layer passes', async (t) => {
  const cases: Array<[file: string, code: string]> = [
    ['src/domain/probe.ts', "import { GLOBAL_DOMAIN } from './tenancy.js'\nexport const x = GLOBAL_DOMAIN\n"],
    ['src/engine/probe.ts', "import type { Queryable } from '../storage/db.js'\nexport type X = Queryable\n"],
    ['src/commands/probe.ts', "import type { Replica } from '../replica/replica.js'\nexport type X = Replica\n"],
    ['src/cli/probe.ts', "import { createLocalizer } from '../i18n/index.js'\nexport const x = createLocalizer\n"],
    ['src/http/plugins/probe.ts', "import type { Config } from '../../config.js'\nexport type X = Config\n"],
    ['src/modelGate.ts', "import { readDecisions } from './modelCheck/modelCheck.js'\nexport const x = readDecisions\n"],
  ]
  for (const [file, code] of cases) t.same(await layerErrors(file, code), [], `${file}: ${code.split('\n')[0]}`)
})

t.test('every folder and root file of src/ belongs to a layer', async (t) => {
  const parts = readdirSync(new URL('../src/', import.meta.url), { withFileTypes: true }).map((entry) =>
    entry.isDirectory() ? entry.name : entry.name.replace(/\.ts$/, ''),
  )
  t.same(parts.filter((part) => !(part in LAYERS)), [], 'a new part of src/ is given its place in eslint.config.js')
})

t.test('docs/architecture.md names every module of src/', async (t) => {
  const doc = readFileSync(new URL('../docs/architecture.md', import.meta.url), 'utf8')
  const layers = doc.slice(doc.indexOf('## Layers'), doc.indexOf('\n## ', doc.indexOf('## Layers') + 1))
  const named = new Set(layers.match(/[A-Za-z][\w.]*/g))
  const modules = readdirSync(new URL('../src/', import.meta.url), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts'))
    .map((path) => path.split('/').at(-1)?.replace(/\.ts$/, '') ?? path)
  t.same(modules.filter((name) => !named.has(name) && !named.has(`${name}.ts`)).sort(), [], 'each has its line')
})
