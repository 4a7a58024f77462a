/**
 * Rules of the code's shape that a reader would otherwise have to keep by
 * hand (docs/architecture.md): each is written once, and this file fails
 * when a second copy appears.
 */
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { DOMAIN_PATTERN, PERMISSION_PART_PATTERN, identifierBytes, isDomainName, isPermissionPart } from '../src/domain/identifiers.js'
import { byCodeUnits } from '../src/domain/textOrder.js'
import { onceOnPGlite } from './support/onceOnPGlite.js'

onceOnPGlite("the code's own text; no database")

const root = new URL('../', import.meta.url)
const filesUnder = (folder: string, ending: string): string[] =>
  readdirSync(new URL(folder, root), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith(ending))
    .map((path) => `${folder}${path}`)
const source = filesUnder('src/', '.ts').map((path) => ({ path, text: readFileSync(new URL(path, root), 'utf8') }))
const holding = (re: RegExp) => source.filter((f) => re.test(f.text)).map((f) => f.path)


t.test('text is sorted in code-unit order, never the locale’s', async (t) => {
  t.same(['b', 'B', '_', 'a', '-', 'Z'].sort(byCodeUnits), ['-', 'B', 'Z', '_', 'a', 'b'])
  t.same(holding(/\.localeCompare\(/), [], 'no localeCompare in src/')
})

t.test("the platform's domain is GLOBAL_DOMAIN, not a literal (SQL text aside)", async (t) => {
  // A literal inside a SQL string reads more plainly there than an interpolation.
  const literal = /(^|[^"])'global'/m
  const outsideSql = source.filter((f) => !f.path.startsWith('src/storage/') && f.path !== 'src/domain/principals.ts')
  t.same(outsideSql.filter((f) => literal.test(f.text)).map((f) => f.path), [])
})

t.test('the identifier patterns are compiled in one place, and their byte tables read from them', async (t) => {
  t.same(holding(/new RegExp\((DOMAIN|PERMISSION_PART|MERCHANT_ID)_PATTERN/), ['src/domain/identifiers.ts'], 'one compiled regular expression each')
  t.same(holding(/isLower|isUpper|0x61 && c <= 0x7a/), [], 'no hand-written byte classes')
  for (const [pattern, test] of [
    [DOMAIN_PATTERN, isDomainName],
    [PERMISSION_PART_PATTERN, isPermissionPart],
  ] as const) {
    const bytes = identifierBytes(pattern)
    const wrong: string[] = []
    for (let c = 0; c < 256; c++) {
      const ch = String.fromCharCode(c)
      if ((bytes.first[c] === 1) !== (c < 128 && test(ch))) wrong.push(`first ${c}`)
      if ((bytes.rest[c] === 1) !== (c < 128 && test(`a${ch}`) && test(`${String.fromCharCode(bytes.first.indexOf(1))}${ch}`))) wrong.push(`rest ${c}`)
    }
    t.same(wrong, [], `${pattern}: the tables say what the pattern says`)
    t.equal(bytes.maxLength, 64)
    t.ok(test('a'.repeat(64)) && !test('a'.repeat(65)), 'the longest value is the one the pattern allows')
  }
})

t.test("check-batch's limit is MAX_BATCH_CHECKS, not a number beside it", async (t) => {
  t.same(holding(/maxItems: 100\b/), [])
})

t.test('test helpers live in test/helper.ts and test/support/', async (t) => {
  const helpers = filesUnder('test/', '.ts').filter((path) => !path.endsWith('.test.ts'))
  t.same(helpers.filter((path) => path !== 'test/helper.ts' && !path.startsWith('test/support/')), [])
})
