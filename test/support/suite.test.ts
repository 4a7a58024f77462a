/**
 * How `npm test` and CI run the files: in SUITE_PARTS processes
 * (test/suites/), each importing its share (test/support/suite.ts). These
 * tests fail when a file would run twice or never.
 */
import { readFileSync, readdirSync } from 'node:fs'
import t from 'tap'
import { SUITE_PARTS, partFiles, suiteFiles } from './suite.js'
import { onceOnPGlite } from './onceOnPGlite.js'

onceOnPGlite('the test tree itself; no database')

const testRoot = new URL('../', import.meta.url)
const allParts = (onPostgres: boolean) => Array.from({ length: SUITE_PARTS }, (_, part) => partFiles(part, onPostgres))
const runsOnceOnPGlite = (path: string) => readFileSync(new URL(path, testRoot), 'utf8').includes('onceOnPGlite(')

t.test('every test file runs in exactly one part', async (t) => {
  const files = suiteFiles()
  t.ok(files.includes('support/suite.test.ts'), 'this file is among them')
  t.ok(files.includes('http/verify.test.ts') && files.includes('cli.test.ts'), 'files in folders and at the top')
  t.notOk(files.some((path) => path.startsWith('suites/')), 'the parts are not files of a part')
  const ran = allParts(false).flat()
  t.equal(ran.length, files.length, 'no file twice')
  t.same([...ran].sort(), [...files].sort(), 'no file left out')
})

t.test('the parts share the files evenly', async (t) => {
  const sizes = allParts(false).map((files) => files.length)
  t.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `part sizes ${sizes.join(', ')}`)
})

t.test('on PostgreSQL the parts leave out exactly the files that run once, on PGlite', async (t) => {
  const ran = allParts(true).flat().sort()
  const expected = suiteFiles().filter((path) => !runsOnceOnPGlite(path)).sort()
  t.same(ran, expected)
  t.ok(ran.includes('storage/conformance.test.ts'), 'a back-end file runs there')
  t.notOk(ran.includes('support/suite.test.ts'), 'this file does not')
})

t.test('test/suites holds one file per part, each running its own part', async (t) => {
  const names = readdirSync(new URL('suites/', testRoot)).sort()
  t.same(names, Array.from({ length: SUITE_PARTS }, (_, part) => `part${String(part + 1).padStart(2, '0')}.test.ts`))
  names.forEach((name, part) => {
    const text = readFileSync(new URL(`suites/${name}`, testRoot), 'utf8')
    t.match(text, new RegExp(`await runPart\\(${part}\\)`), `${name} runs part ${part}`)
  })
})
