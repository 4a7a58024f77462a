import { BracketAwareCsvParser } from 'casbin'
import t from 'tap'
import { compareRules, formatPolicyCsv, formatRule, parsePolicyCsv, readCsvLine, splitPlainLine, type CsvLine, type Rule } from '../../src/domain/policyCsv.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

const USER = '0b7e8a52-1c1d-4c39-9a55-7d0f6f0e2b11'

t.test('readCsvLine reads a line as Casbin does', async (t) => {
  const rule = (ptype: 'p' | 'g', ...values: string[]): CsvLine => ({ kind: 'rule', rule: { ptype, values } })
  const problem = (reason: string): CsvLine => ({ kind: 'problem', reason })
  const cases: [string, string, CsvLine][] = [
    ['a plain p line', 'p, clerk, m-1, orders, refund, allow', rule('p', 'clerk', 'm-1', 'orders', 'refund', 'allow')],
    ['no spaces', 'p,clerk,m-1,orders,refund,deny', rule('p', 'clerk', 'm-1', 'orders', 'refund', 'deny')],
    ['spaces around values are trimmed', '  g ,  u-1 , clerk ,  m-1  ', rule('g', 'u-1', 'clerk', 'm-1')],
    ['quoted values', 'p, "clerk", "m-1", orders, "refund", allow', rule('p', 'clerk', 'm-1', 'orders', 'refund', 'allow')],
    ['a comma inside quotes is data', 'p, "a,b", m-1, orders, refund, allow', rule('p', 'a,b', 'm-1', 'orders', 'refund', 'allow')],
    ['a doubled quote inside quotes is one quote', 'p, "say ""hi""", m-1, orders, refund, allow', rule('p', 'say "hi"', 'm-1', 'orders', 'refund', 'allow')],
    ['# inside a value is data', 'p, clerk, m#1, orders, refund, allow', rule('p', 'clerk', 'm#1', 'orders', 'refund', 'allow')],
    ['# after the last value belongs to it', 'p, clerk, m-1, orders, refund, allow # note', problem('the effect must be allow or deny, not "allow # note"')],
    ['a line starting with # is a comment', '# p, clerk, m-1, orders, refund, allow', { kind: 'comment', text: '# p, clerk, m-1, orders, refund, allow' }],
    ['so is an indented one', '   # note', { kind: 'comment', text: '   # note' }],
    ['blank', '   ', { kind: 'blank' }],
    ['a carriage return is trimmed', 'g, u-1, clerk, m-1\r', rule('g', 'u-1', 'clerk', 'm-1')],
    ['a short p line', 'p, clerk, m-1, orders', problem('expected p, <sub-role or user id>, <domain>, <obj>, <act>, allow|deny')],
    ['a long g line', 'g, u-1, clerk, m-1, extra', problem('expected g, <user id or sub-role>, <sub-role>, <domain>')],
    ['an empty value', 'p, clerk, , orders, refund, allow', problem('expected p, <sub-role or user id>, <domain>, <obj>, <act>, allow|deny')],
    ['an empty quoted value', 'g, u-1, "", m-1', problem('expected g, <user id or sub-role>, <sub-role>, <domain>')],
    ['another section', 'p2, clerk, m-1, orders, read, allow', problem('a policy line starts with p or g, not "p2"')],
    ['not a rule at all', 'clerk, m-1', problem('a policy line starts with p or g, not "clerk"')],
    ['an odd effect', 'p, clerk, m-1, orders, refund, maybe', problem('the effect must be allow or deny, not "maybe"')],
  ]
  for (const [name, line, expected] of cases) t.same(readCsvLine(line), expected, name)
  const unclosed = readCsvLine('p, "clerk, m-1, orders, refund, allow')
  t.equal(unclosed.kind, 'problem', 'an unclosed quote')
  t.match(unclosed, { reason: /^cannot be read as CSV: / })
})

t.test('a plain line is split as the Casbin parser splits it, and any other line is left to that parser', async (t) => {
  const casbin = new BracketAwareCsvParser()
  // Lines of the plain characters in every arrangement the generator finds: empty values, runs of spaces, commas at either end.
  const alphabet = 'pg a1_.:@-,  ,,'
  let seed = 7
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31)
  for (let n = 0; n < 5000; n++) {
    const line = Array.from({ length: 1 + (next() % 40) }, () => alphabet[next() % alphabet.length]).join('')
    if (line.trim() === '') continue
    const plain = splitPlainLine(line)
    if (plain === null || JSON.stringify(plain) !== JSON.stringify(casbin.parse(line)?.[0])) {
      t.same(plain, casbin.parse(line)?.[0], `"${line}"`)
      return
    }
  }
  t.same(splitPlainLine('p, imp_1, i-2, orders, read, allow'), ['p', 'imp_1', 'i-2', 'orders', 'read', 'allow'])
  for (const line of ['p, "a", b', 'p, a(b, c)', 'p,\ta', 'g, u-1, clerk, m-1\r', 'p, caf\u00e9', 'p, m#1']) t.equal(splitPlainLine(line), null, JSON.stringify(line))
})

t.test('formatRule quotes only what needs it, and reads back', async (t) => {
  const cases: [string, Rule, string][] = [
    ['stored identifiers are never quoted', { ptype: 'p', values: ['clerk', 'm-1', 'orders', 'refund', 'allow'] }, 'p, clerk, m-1, orders, refund, allow'],
    ['a g line', { ptype: 'g', values: [USER, 'clerk', 'm-1'] }, `g, ${USER}, clerk, m-1`],
    ['a comma is quoted', { ptype: 'p', values: ['a,b', 'm-1', 'orders', 'refund', 'allow'] }, 'p, "a,b", m-1, orders, refund, allow'],
    ['a quote is quoted and doubled', { ptype: 'p', values: ['say "hi"', 'm-1', 'orders', 'refund', 'allow'] }, 'p, "say ""hi""", m-1, orders, refund, allow'],
    ['# needs no quotes', { ptype: 'p', values: ['clerk', 'm#1', 'orders', 'refund', 'allow'] }, 'p, clerk, m#1, orders, refund, allow'],
    ['nor do spaces inside', { ptype: 'g', values: ['u 1', 'clerk', 'm-1'] }, 'g, u 1, clerk, m-1'],
  ]
  for (const [name, rule, line] of cases) {
    t.equal(formatRule(rule), line, name)
    t.same(readCsvLine(line), { kind: 'rule', rule }, `${name}: read back`)
  }
  t.throws(() => formatRule({ ptype: 'g', values: ['a\nb', 'clerk', 'm-1'] }), /cannot hold a line break/)
})

t.test('a whole file: format, then parse, gives the same rules', async (t) => {
  const expiresAt = Date.parse('2030-01-31T18:00:00.000Z')
  const rules: Rule[] = [
    { ptype: 'g', values: [USER, 'clerk', 'm-1'] },
    { ptype: 'p', values: [USER, 'm-1', 'orders', 'refund', 'deny'], expiresAt },
    { ptype: 'p', values: ['clerk', 'm-1', 'orders', 'refund', 'allow'] },
    { ptype: 'p', values: ['clerk', 'global', 'reports', 'read', 'allow'] },
    { ptype: 'p', values: ['a,b', 'm-1', 'say "hi"', 'x#y', 'deny'] },
  ]
  const scopes = [{ domain: null }, { domain: 'm-1' }]
  for (const scope of scopes) {
    const text = formatPolicyCsv(rules, scope)
    const parsed = parsePolicyCsv(text)
    t.same(parsed.problems, [], `scope ${scope.domain ?? 'all'}: no problem`)
    t.same(parsed.header, { format: 1, scope }, `scope ${scope.domain ?? 'all'}: the header`)
    const back = parsed.lines.map(({ line: _line, ...rule }) => rule)
    t.same(back, [...rules].sort(compareRules), `scope ${scope.domain ?? 'all'}: every rule, in file order`)
    t.equal(formatPolicyCsv(back, scope), text, `scope ${scope.domain ?? 'all'}: formatted again, the same bytes`)
  }
  t.equal(
    formatPolicyCsv(rules, { domain: null }),
    [
      '# policy-format: 1',
      '# scope: all',
      'p, clerk, global, reports, read, allow',
      'p, "a,b", m-1, "say ""hi""", x#y, deny',
      'p, clerk, m-1, orders, refund, allow',
      '# expires_at 2030-01-31T18:00:00.000Z',
      `p, ${USER}, m-1, orders, refund, deny`,
      `g, ${USER}, clerk, m-1`,
      '',
    ].join('\n'),
    'sorted: p before g, global first, roles before users',
  )
})

t.test('parsePolicyCsv: comments and problems by line', async (t) => {
  const cases: [string, string, { lines: number; problems: Array<{ line: number; reason: string | RegExp }> }][] = [
    ['comment lines and blank lines are skipped', '# a note\n\np, clerk, m-1, orders, refund, allow\n  # indented\n', { lines: 1, problems: [] }],
    ['an expiry before a role rule', `# expires_at 2030-01-01T00:00:00Z\np, clerk, m-1, orders, refund, allow\n`, { lines: 1, problems: [{ line: 1, reason: /must come just before a user's override line/ }] }],
    ['an expiry with no line after it', `p, clerk, m-1, orders, refund, allow\n# expires_at 2030-01-01T00:00:00Z\n`, { lines: 1, problems: [{ line: 2, reason: /must come just before/ }] }],
    ['an unreadable expiry', `# expires_at soon\np, ${USER}, m-1, orders, refund, allow\n`, { lines: 1, problems: [{ line: 1, reason: /RFC 3339/ }] }],
    ['half a header', '# policy-format: 1\np, clerk, m-1, orders, refund, allow\n', { lines: 1, problems: [{ line: 1, reason: /the header needs both lines/ }] }],
    ['a header after a rule', 'p, clerk, m-1, orders, refund, allow\n# policy-format: 1\n', { lines: 1, problems: [{ line: 2, reason: /comes before the first rule/ }] }],
    ['a broken line among good ones', 'p, clerk, m-1, orders, refund, allow\np, clerk\ng, u-1, clerk, m-1\n', { lines: 2, problems: [{ line: 2, reason: /^expected p/ }] }],
  ]
  for (const [name, text, expected] of cases) {
    const parsed = parsePolicyCsv(text)
    t.equal(parsed.lines.length, expected.lines, `${name}: rules`)
    t.match(parsed.problems, expected.problems, `${name}: problems`)
    t.equal(parsed.problems.length, expected.problems.length, `${name}: no other problem`)
  }
})
