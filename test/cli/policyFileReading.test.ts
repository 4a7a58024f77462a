/**
 * `model check --policy F` and `policy import --file F` read one file the
 * same way, as Casbin's file adapter does: quotes, a comma inside quotes,
 * `#` inside a value, comment lines. On PGlite and on PostgreSQL.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import type { Caller } from '../../src/commands/context.js'
import { grantRolePermission } from '../../src/commands/changeRolePermission.js'
import { readPolicyFile } from '../../src/modelCheck/modelCheck.js'
import { parsePolicyCsv } from '../../src/domain/policyCsv.js'
import { backend, buildTestApp, onboard, register, tempDir } from '../helper.js'
import { cliOn } from '../support/cli.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('how two commands read one file')

/** Every value of a rule line quoted (`""` inside), the way a spreadsheet might write it back. */
const quoted = (line: string) =>
  line.startsWith('p') || line.startsWith('g')
    ? line
        .split(', ')
        .map((v, i) => (i === 0 ? v : `"${v.replace(/"/g, '""')}"`))
        .join(',  ')
    : line

t.test(`one file, read alike by model check and policy import (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const { service } = ta
  await onboard(ta, 'm-1')
  await register(ta, { email: 'clerk@m-1.example', sub_role_code: 'clerk', merchant_id: 'm-1' })
  const root: Caller = { account: ta.root, ip: null }
  await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'refund', domain: 'm-1' })
  await grantRolePermission(service, root, 'clerk', { obj: 'orders', act: 'read', domain: 'global' })

  const dir = tempDir(t)
  const write = (name: string, text: string) => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }
  const cli = cliOn(service.db)
  const loaded = (out: string) => /loads through it: (\d+) p rules, (\d+) g rules/.exec(out)?.slice(1).map(Number)

  const exported = await cli('policy', 'export')
  t.equal(exported.code, 0, exported.err)
  const stored = parsePolicyCsv(exported.out).lines
  const counts = [stored.filter((r) => r.ptype === 'p').length, stored.filter((r) => r.ptype === 'g').length]
  t.ok((counts[0] ?? 0) >= 2 && (counts[1] ?? 0) >= 2, 'a policy with rules and assignments')

  // The stored policy again, every value quoted, among comment lines that hold commas, quotes and rules.
  const [format = '', scope = '', ...rules] = exported.out.split('\n')
  const tricky = [
    format,
    scope,
    '# a comment, with commas, "quotes" and # signs',
    '   # p, clerk, m-1, payouts, approve, allow  (an indented comment, not a rule)',
    '',
    ...rules.map(quoted),
    '#g, nobody, clerk, m-1',
  ].join('\n')
  const same = write('tricky.csv', `${tricky}\n`)

  t.same(readPolicyFile(same), { p: stored.filter((r) => r.ptype === 'p').map((r) => r.values), g: stored.filter((r) => r.ptype === 'g').map((r) => r.values) }, 'model check reads the stored rules')
  const checked = await cli('model', 'check', '--policy', same)
  t.equal(checked.code, 0, checked.err)
  t.same(loaded(checked.out), counts, 'model check loads every rule and no comment')
  t.same(await cli('policy', 'import', '--file', same, '--dry-run'), { code: 0, out: 'no change: the store already holds this policy\ndry run: nothing was written', err: '' }, 'import reads the stored rules')

  // A comma inside quotes is one value to both: model check loads the line, import names the value.
  const lines = tricky.split('\n').length
  const comma = write('comma.csv', `${tricky}\np, "clerk, senior", m-1, orders, refund, allow\n`)
  const checkedComma = await cli('model', 'check', '--policy', comma)
  t.equal(checkedComma.code, 0, checkedComma.err)
  t.same(loaded(checkedComma.out), [(counts[0] ?? 0) + 1, counts[1]], 'model check: one more p rule, not a line of seven values')
  t.same(readPolicyFile(comma).p.at(-1), ['clerk, senior', 'm-1', 'orders', 'refund', 'allow'])
  const importedComma = await cli('policy', 'import', '--file', comma, '--dry-run')
  t.equal(importedComma.code, 2)
  t.match(importedComma.err, `${comma}:${lines + 1}: the subject must be a sub-role code (a-z, 0-9, _) or a user id, not "clerk, senior"`)

  // `#` inside a line is data to both: after the last value it is part of the effect, inside a domain part of the domain.
  const hashes = write('hashes.csv', `${tricky}\np, clerk, m-1, orders, refund, allow # until Friday\np, clerk, m#1, orders, refund, allow\n`)
  const checkedHashes = await cli('model', 'check', '--policy', hashes)
  t.not(checkedHashes.code, 0, 'model check refuses the line')
  t.match(checkedHashes.err, `${hashes}:${lines + 1}: the effect must be allow or deny, not "allow # until Friday"`)
  t.same(readPolicyFile(write('domain.csv', 'p, clerk, m#1, orders, refund, allow\n')).p, [['clerk', 'm#1', 'orders', 'refund', 'allow']])
  const importedHashes = await cli('policy', 'import', '--file', hashes, '--dry-run')
  t.equal(importedHashes.code, 2)
  t.match(importedHashes.err, `${hashes}:${lines + 1}: the effect must be allow or deny, not "allow # until Friday"`)
  t.match(importedHashes.err, `${hashes}:${lines + 2}: unknown domain "m#1": neither global nor a merchant`)
})

t.test('model check reads the header and `# expires_at` as policy import does', async (t) => {
  const dir = tempDir(t)
  const write = (name: string, lines: string[]) => {
    const path = join(dir, name)
    writeFileSync(path, `${lines.join('\n')}\n`)
    return path
  }
  const user = '6f1c2a4e-0000-4000-8000-000000000001'
  const expiring = write('expiring.csv', [
    '# policy-format: 1',
    '# scope: domain m-1',
    '# expires_at 2000-01-01T00:00:00Z',
    `p, ${user}, m-1, orders, refund, allow`,
    '# expires_at 2099-01-01T00:00:00Z',
    `p, ${user}, m-1, orders, read, allow`,
    'p, clerk, m-1, orders, cancel, allow',
  ])
  t.same(
    readPolicyFile(expiring).p,
    [
      [user, 'm-1', 'orders', 'read', 'allow'],
      ['clerk', 'm-1', 'orders', 'cancel', 'allow'],
    ],
    'an override whose instant has passed decides nothing; one still to come does',
  )
  const badHeader = write('header.csv', ['# policy-format: 9', '# scope: all', 'p, clerk, m-1, orders, cancel, allow'])
  t.throws(() => readPolicyFile(badHeader), { message: `${badHeader}:1: policy-format 9 is not one this version reads (it reads 1)` }, 'a header it cannot read')
  const orphan = write('orphan.csv', ['# expires_at 2099-01-01T00:00:00Z', 'p, clerk, m-1, orders, cancel, allow'])
  t.throws(() => readPolicyFile(orphan), { message: new RegExp(`^${orphan}:1: an expires_at comment must come just before a user's override line`) }, 'an expiry that belongs to no override')
})
