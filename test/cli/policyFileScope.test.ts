/**
 * A policy file imported with the wrong scope, or one that would empty the
 * policy, on PGlite and on PostgreSQL: the header names the file's scope, so
 * a one-merchant export imported as the whole policy, a whole export
 * imported for one merchant, and a file with no header are refused, changing
 * nothing; an import that would remove more than a handful of rules and more
 * than a share of those in reach is refused unless the operator says so (the
 * dry run says so too).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { exportPolicy } from '../../src/commands/exportPolicy.js'
import { importPolicy } from '../../src/commands/importPolicy.js'
import { summarizeDiff } from '../../src/domain/policyDiff.js'
import { massRemoval } from '../../src/domain/policyFile.js'
import { cliOn } from '../support/cli.js'
import { fingerprint, twoMerchants } from '../support/policyWorld.js'
import { backend, buildTestApp, tempDir } from '../helper.js'

t.test(`the header's scope must be the import's, and a mass removal is held back (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const { service } = ta
  await twoMerchants(ta)
  const whole = (await exportPolicy(service)).csv
  const m1 = (await exportPolicy(service, { domain: 'm-1' })).csv
  t.ok(whole.startsWith('# policy-format: 1\n# scope: all\n'))
  t.ok(m1.startsWith('# policy-format: 1\n# scope: domain m-1\n'))
  const before = await fingerprint(service.db)

  const refusals: Array<[string, () => Promise<unknown>, RegExp]> = [
    ["one merchant's export as the whole policy", () => importPolicy(service, m1), /holds domain m-1 only \(# scope: domain m-1\) and is imported without --domain: import it with --domain m-1/],
    ["one merchant's export as another's", () => importPolicy(service, m1, { domain: 'm-2', dryRun: true }), /holds domain m-1 only .* imported with --domain m-2/],
    ['the whole policy for one merchant', () => importPolicy(service, whole, { domain: 'm-1' }), /holds the whole policy \(# scope: all\) and is imported with --domain m-1/],
    ['a file of comments only', () => importPolicy(service, '# nothing to see\n'), /the file has no header/],
    ['an empty file', () => importPolicy(service, ''), /the file has no header/],
    ['a file without a header', () => importPolicy(service, whole.split('\n').slice(2).join('\n'), { dryRun: true }), /no header .*--allow-headerless/],
  ]
  for (const [name, attempt, message] of refusals) await t.rejects(attempt(), { message }, name)
  const newer = await importPolicy(service, whole.replace('policy-format: 1', 'policy-format: 2')).catch((error: unknown) => error)
  t.match(newer, { name: 'PolicyFileError', problems: [{ line: 1, reason: 'policy-format 2 is not one this version reads (it reads 1)' }] }, 'a format this version does not read')
  t.same(await fingerprint(service.db), before, 'nothing changed')

  // With the header, a file of no rules would remove everything: held back, the dry run says so.
  const empty = '# policy-format: 1\n# scope: all\n'
  const dry = await importPolicy(service, empty, { dryRun: true })
  t.equal(dry.diff.removed.length, 17)
  t.equal(dry.refusal, 'the import would remove 17 of the 17 rules in its reach (100%), more than 5 and more than 10%: check the file, then pass --allow-mass-removal (or raise --max-removal-percent) to apply it')
  await t.rejects(importPolicy(service, empty), { name: 'PolicyFileRefused', message: dry.refusal ?? '' })
  // Dropping one merchant's rules from the whole file: 8 of 17.
  const withoutM2 = whole.split('\n').filter((l) => !l.includes(', m-2, ')).join('\n')
  await t.rejects(importPolicy(service, withoutM2), { message: /remove 8 of the 17 rules .*\(47.1%\)/ })
  await t.rejects(importPolicy(service, withoutM2, { maxRemovalShare: 0.4 }), { message: /more than 40%/ }, 'the share is the caller’s')
  t.same(await fingerprint(service.db), before, 'nothing changed')

  // A few rules are never held back; a share above the limit passes when raised or allowed.
  const fewer = whole.split('\n').filter((l) => !/, m-1, (orders|payouts), /.test(l)).join('\n')
  const five = await importPolicy(service, fewer, { dryRun: true })
  t.same([five.diff.removed.length, five.refusal], [5, null], 'five removals pass whatever their share')
  const allowed = await importPolicy(service, withoutM2, { maxRemovalShare: 0.5 })
  t.equal(allowed.diff.removed.length, 8, 'under a raised share the import applies')
  const m1Empty = '# policy-format: 1\n# scope: domain m-1\n'
  await t.rejects(importPolicy(service, m1Empty, { domain: 'm-1' }), { message: /remove 8 of the 8 rules/ }, 'the reach of --domain is its domain')
  const forced = await importPolicy(service, m1Empty, { domain: 'm-1', allowMassRemoval: true })
  t.equal(forced.diff.removed.length, 8, '--allow-mass-removal applies it')
  t.same(
    (await exportPolicy(service)).csv.split('\n').filter((l) => l.startsWith('p')),
    ['p, ops, global, orders, read, allow'],
    'only global is left',
  )

  // A headerless file, when the operator says so, is imported as the scope asked for.
  const headerless = await importPolicy(service, 'p, clerk, m-1, orders, read, allow\n', { domain: 'm-1', allowHeaderless: true })
  t.equal(summarizeDiff(headerless.diff), '1 change: 1 added, 0 removed, 0 overrides change effect or expiry')

  t.same(massRemoval(6, 1000, 0.1), null, 'six of a thousand is no mass removal')
  t.same(massRemoval(6, 50, 0.1), { removed: 6, inReach: 50, maxShare: 0.1 })
  t.same(massRemoval(5, 5, 0.1), null)
})

t.test(`the command line: refusals exit 2, the dry run says what the import would refuse (${backend})`, async (t) => {
  const ta = await buildTestApp(t)
  const { service } = ta
  await twoMerchants(ta)
  const dir = tempDir(t)
  const cli = cliOn(service.db)
  const write = (name: string, text: string) => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }
  const m1 = write('m-1.csv', (await exportPolicy(service, { domain: 'm-1' })).csv)
  const before = await fingerprint(service.db)

  const wrongScope = await cli('policy', 'import', '--file', m1)
  t.same(
    wrongScope,
    {
      code: 2,
      out: '',
      err: `${m1} was refused: the file holds domain m-1 only (# scope: domain m-1) and is imported without --domain: import it with --domain m-1; nothing was changed`,
    },
    "a merchant's file without --domain",
  )
  const comments = write('comments.csv', '# p, clerk, m-1, orders, read, allow\n')
  const noHeader = await cli('policy', 'import', '--file', comments, '--dry-run')
  t.equal(noHeader.code, 2)
  t.match(noHeader.err, /has no header/)

  const emptied = write('emptied.csv', '# policy-format: 1\n# scope: domain m-1\n')
  const dry = await cli('policy', 'import', '--file', emptied, '--domain', 'm-1', '--dry-run')
  t.equal(dry.code, 2, 'a dry run exits as the import would')
  t.match(dry.out, /^- p, clerk, m-1, orders, cancel, allow\n[\s\S]*8 changes: 0 added, 8 removed[\s\S]*\ndry run: nothing was written$/)
  t.equal(dry.err, `${emptied} would be refused: the import would remove 8 of the 8 rules in its reach (100%), more than 5 and more than 10%: check the file, then pass --allow-mass-removal (or raise --max-removal-percent) to apply it`)
  const refused = await cli('policy', 'import', '--file', emptied, '--domain', 'm-1')
  t.equal(refused.code, 2)
  t.match(refused.err, /was refused: the import would remove 8 of the 8 rules .*; nothing was changed$/)
  t.same(await fingerprint(service.db), before, 'nothing changed')
  t.equal((await cli('policy', 'import', '--file', emptied, '--domain', 'm-1', '--max-removal-percent', '101')).code, 2, 'a share over 100%')
  const raised = await cli('policy', 'import', '--file', emptied, '--domain', 'm-1', '--max-removal-percent', '100', '--dry-run')
  t.equal(raised.code, 0, raised.err)
  const applied = await cli('policy', 'import', '--file', emptied, '--domain', 'm-1', '--allow-mass-removal')
  t.equal(applied.code, 0, applied.err)
  t.match(applied.out, /8 changes: 0 added, 8 removed, 0 overrides change effect or expiry\napplied in one transaction/)

  const expired = write('expired.csv', `# policy-format: 1\n# scope: domain m-1\n# expires_at 2020-01-01T00:00:00Z\np, ${ta.root.id}, m-1, orders, read, allow\n`)
  const skipped = await cli('policy', 'import', '--file', expired, '--domain', 'm-1', '--dry-run')
  t.equal(skipped.code, 0, skipped.err)
  t.equal(
    skipped.out,
    [
      `skipped ${expired}:4: p, ${ta.root.id}, m-1, orders, read, allow  # expires_at 2020-01-01T00:00:00.000Z has expired`,
      'no change: the store already holds this policy',
      'dry run: nothing was written',
    ].join('\n'),
    'an override that has expired is skipped unchecked and named',
  )
})

