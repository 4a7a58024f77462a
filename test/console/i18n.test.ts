/**
 * The console speaks English and Spanish in full: every text it shows has
 * both, the values it names (audit actions, target types, reasons, "via")
 * have words in both, plurals follow each language's rules, and the API's own
 * message files (src/i18n/) hold the same keys in both languages.
 */
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { AUDIT_ACTIONS, AUDIT_TARGET_TYPES } from '../../src/domain/audit.js'
import { REASON_KINDS } from '../../src/engine/explain.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { repositoryRoot } from '../support/serverProcess.js'

onceOnPGlite('browser modules and message files without a database')

type Messages = Record<string, Record<string, string>>
interface Translate {
  (key: string, params?: Record<string, unknown>): string
  has(key: string): boolean
}
// Browser scripts without types: loaded by their file URLs.
const consoleDir = join(repositoryRoot, 'console')
const i18n = (await import(pathToFileURL(join(consoleDir, 'i18n.js')).href)) as { MESSAGES: Messages; translator: (lang: string) => Translate }
const { MESSAGES, translator } = i18n

const keysOf = (messages: Record<string, string> | undefined) => Object.keys(messages ?? {}).sort()

t.test('every console text has English and Spanish', async (t) => {
  const missing = (from: string, to: string) => keysOf(MESSAGES[from]).filter((key) => !(MESSAGES[to]?.[key] ?? '').trim())
  t.same(missing('en', 'es'), [], 'no English text lacks its Spanish')
  t.same(missing('es', 'en'), [], 'no Spanish text lacks its English')
})

t.test("every key the console's scripts name has a text", async (t) => {
  const used = new Set<string>()
  for (const file of readdirSync(consoleDir).filter((name) => name.endsWith('.js'))) {
    for (const match of readFileSync(join(consoleDir, file), 'utf8').matchAll(/\bt\('([A-Za-z_]+)'/g)) used.add(match[1] as string)
  }
  t.ok(used.size > 50, 'the scan finds the calls')
  t.same([...used].filter((key) => MESSAGES.en?.[key] === undefined && MESSAGES.en?.[`${key}_other`] === undefined).sort(), [], 'none is missing')
})

t.test('the values the API answers have words in both languages', async (t) => {
  const families: Array<[string, readonly string[]]> = [
    ['action_', AUDIT_ACTIONS],
    ['targetType_', AUDIT_TARGET_TYPES],
    ['reason_', REASON_KINDS],
    // HolderVia (src/engine/holders.ts), a type only.
    ['via_', ['root', 'role', 'user']],
  ]
  for (const lang of ['en', 'es']) {
    for (const [prefix, values] of families) {
      t.same(values.filter((value) => MESSAGES[lang]?.[`${prefix}${value}`] === undefined), [], `${lang}: every ${prefix}…`)
    }
  }
  // lists.js imports the Preact bundle the service serves (not a file here): its constants are read from its text.
  const lists = readFileSync(join(consoleDir, 'lists.js'), 'utf8')
  const constant = (name: string) => JSON.parse((new RegExp(`${name} = (\\[[^\\]]*\\])`).exec(lists)?.[1] ?? '[]').replace(/'/g, '"')) as string[]
  t.same(constant('TARGET_TYPES').sort(), [...AUDIT_TARGET_TYPES].sort(), "the audit filter offers the API's target types")
  t.same(constant('AUDIT_ACTIONS'), [...AUDIT_ACTIONS], "and the API's actions, in its order")
})

t.test('plurals follow the language', async (t) => {
  const en = translator('en')
  const es = translator('es')
  t.equal(en('previewGrant', { count: 1, pair: 'orders:refund' }), '1 user gains orders:refund')
  t.equal(en('previewGrant', { count: 3, pair: 'orders:refund' }), '3 users gain orders:refund')
  t.equal(es('previewGrant', { count: 1, pair: 'orders:refund' }), '1 usuario obtiene orders:refund')
  t.equal(es('previewRevoke', { count: 0, pair: 'orders:refund' }), '0 usuarios pierden orders:refund')
  t.equal(en('batchPending', { count: 1 }), '1 change waiting')
  t.equal(es('batchPending', { count: 2 }), '2 cambios pendientes')
  t.equal(es('batchGains', { count: 1 }), '1 usuario obtiene acceso.')
  t.equal(es('batchLoses', { count: 3 }), '3 usuarios pierden acceso.')
})

t.test("the API's message files hold the same keys in both languages, none empty", async (t) => {
  const flat = (value: unknown, prefix = ''): string[] =>
    typeof value === 'object' && value !== null
      ? Object.entries(value).flatMap(([key, inner]) => flat(inner, prefix === '' ? key : `${prefix}.${key}`))
      : typeof value === 'string' && value.trim() !== ''
        ? [prefix]
        : []
  const read = (lang: string) => flat(JSON.parse(readFileSync(join(repositoryRoot, 'src', 'i18n', `${lang}.json`), 'utf8')))
  const en = read('en')
  const es = read('es')
  t.same(en.filter((key) => !es.includes(key)), [], 'no English API message lacks its Spanish')
  // Catalog labels are declared in code in English: only other languages translate them there.
  t.same(es.filter((key) => !en.includes(key) && !key.startsWith('catalog.')), [], 'and none the other way')
  t.ok(en.includes('validation.minLength_one'), 'validation lengths have plural forms')
})
