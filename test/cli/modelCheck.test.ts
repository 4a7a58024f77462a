import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { TEST_SECRET, buildTestApp, freshDatabase, register, tempDir } from '../helper.js'
import { repositoryRoot } from '../support/serverProcess.js'
import { cliFor, cliOn } from '../support/cli.js'
import { COMPILE_CACHE_ENV, TEST_NODE_ARGS } from '../support/nodeArgs.js'

const run = promisify(execFile)
const shippedModel = join(repositoryRoot, 'model.conf')
const shippedDecisions = join(repositoryRoot, 'model.decisions')
const reference = readFileSync(shippedModel, 'utf8')
const decisionsText = readFileSync(shippedDecisions, 'utf8')
const STACK_FRAME = /\n\s+at |\.ts:\d+|node_modules/

/**
 * A database nobody can reach: a command that opened one would fail with
 * "the database is unavailable", so passing under it shows the check ran on
 * files alone, as CI runs it.
 */
const NO_DATABASE = { DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none', JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' }

/** The line number of the decision in model.decisions that starts with `text`. */
function lineOf(text: string): number {
  const index = decisionsText.split('\n').findIndex((l) => l.startsWith(text))
  if (index < 0) throw new Error(`model.decisions has no line ${text}`)
  return index + 1
}

const decisionCount = decisionsText.split('\n').filter((l) => l.replace(/#.*$/, '').includes('->')).length

function writer(dir: string) {
  return (name: string, text: string): string => {
    writeFileSync(join(dir, name), text)
    return join(dir, name)
  }
}

const withoutDeny = reference.replace(' && !some(where (p.eft == deny))', '')

t.test('the shipped decisions hold for model.conf, with no database', async (t) => {
  const cli = cliFor(NO_DATABASE)
  const result = await cli('model', 'check', '--decisions', shippedDecisions)
  t.equal(result.code, 0, result.err)
  t.match(result.out, /model .*model\.conf is valid; the policy in .*model\.decisions loads through it: \d+ p rules, \d+ g rules/)
  t.match(result.out, new RegExp(`decisions in .*model\\.decisions: all ${decisionCount} hold`))
  t.match(result.out, /^decisions will use the decision index: [\d,]+ uncached decisions a second, measured at \d+ p rules and \d+ g rules$/m, 'the path and its cost')
  t.equal(result.err, '')
})

t.test('a model without the deny part of its effect fails them, naming each line', async (t) => {
  const write = writer(tempDir(t, 'model-check-'))
  t.not(withoutDeny, reference, 'the deny part was removed')
  const model = write('no-deny.conf', withoutDeny)
  const cli = cliFor(NO_DATABASE)

  const alone = await cli('model', 'check', '--model', model, '--policy', write('policy.csv', 'p, clerk, m-1, orders, refund, allow\n'))
  t.equal(alone.code, 0, 'parsing and replaying alone call it valid')

  const result = await cli('model', 'check', '--model', model, '--decisions', shippedDecisions)
  t.equal(result.code, 1)
  t.match(
    result.out,
    /^the model differs from the one the decision index implements, so decisions will use Casbin's matcher and effect over the rows a question can match .*: [\d,]+ uncached decisions a second, measured at \d+ p rules/m,
    'the path it would get and what that costs',
  )
  const failing: Array<[string, string]> = [
    ['user-bob, m-1, orders, refund', 'his deny override against the role allow'],
    ['user-alice, m-1, orders, delete', 'a role deny in global against her own allow'],
    ['user-olga, m-1, merchant, suspend', 'her global deny against the role allow'],
    ['user-olga, m-2, payouts, view', 'her deny in one merchant against the role global allow'],
    ['user-alice, m-1, reports, export', "a role's deny in a merchant against its own global allow"],
  ]
  for (const [request, why] of failing) {
    t.match(result.out, `model.decisions:${lineOf(request)}: ${request} -> deny, but the model says allow`, why)
  }
  t.equal(result.out.split('\n').filter((l) => l.includes('but the model says')).length, failing.length, 'and no other line')
  t.equal(result.err, `model check failed: ${failing.length} of ${decisionCount} decisions in ${shippedDecisions} do not hold`)
})

t.test('other edits the decisions catch', async (t) => {
  const write = writer(tempDir(t, 'model-check-'))
  const cli = cliFor(NO_DATABASE)
  const edits: Array<[string, string, string[]]> = [
    [
      'domains not compared',
      reference.replace('(p.dom == r.dom || p.dom == "global")', 'true'),
      ['user-alice, m-1, orders, void', 'user-dave, m-2, orders, refund'],
    ],
    [
      'no global assignment branch',
      reference.replace(/ \|\| \\\n\s+\(g\(r\.sub, p\.sub, "global"\) && p\.dom == "global"\)\)/, ')'),
      ['user-olga, m-1, merchant, read', 'user-olga, m-2, merchant, read'],
    ],
    [
      'global grants not reaching merchant domains',
      reference.replace('(p.dom == r.dom || p.dom == "global")', 'p.dom == r.dom'),
      ['user-alice, m-1, reports, view', 'user-dave, m-2, reports, view'],
    ],
    [
      'allow wins',
      reference.replace(/^e = .*$/m, 'e = some(where (p.eft == allow))'),
      ['user-bob, m-1, orders, refund'],
    ],
  ]
  for (const [name, text, failing] of edits) {
    t.not(text, reference, `${name}: the model was edited`)
    const result = await cli('model', 'check', '--model', write(`${name.replace(/\W+/g, '-')}.conf`, text), '--decisions', shippedDecisions)
    t.equal(result.code, 1, `${name}: exit 1`)
    for (const request of failing) t.match(result.out, `model.decisions:${lineOf(request)}: ${request} ->`, `${name}: ${request}`)
  }
})

t.test('decisions files and policy files', async (t) => {
  const write = writer(tempDir(t, 'model-check-'))
  const cli = cliFor(NO_DATABASE)

  const policy = write('policy.csv', '# a Casbin policy\np, clerk, m-1, orders, refund, allow\n\ng, u-1, clerk, m-1\n')
  const bare = write('bare.decisions', 'u-1, m-1, orders, refund -> allow   # through clerk\nu-1, m-2, orders, refund -> deny\n')
  const ok = await cli('model', 'check', '--decisions', bare, '--policy', policy)
  t.equal(ok.code, 0, ok.err)
  t.match(ok.out, /the policy in .*policy\.csv loads through it: 1 p rules, 1 g rules/)
  t.match(ok.out, /decisions in .*bare\.decisions: all 2 hold/)

  const both = await cli('model', 'check', '--decisions', shippedDecisions, '--policy', policy)
  t.equal(both.code, 2, 'a decisions file with its own policy and --policy: which one is meant is unclear')
  t.match(both.err, /has a policy of its own/)

  const onlyPolicy = await cli('model', 'check', '--policy', policy)
  t.equal(onlyPolicy.code, 0, 'a policy alone is replayed, as the stored one would be')

  const broken: Array<[string, string, RegExp]> = [
    ['no arrow', 'u-1, m-1, orders, refund allow\n', /bad\.decisions:1: expected <user or sub-role>, <domain>, <obj>, <act> -> allow\|deny/],
    ['three fields', '\n# fine\nu-1, m-1, orders -> allow\n', /bad\.decisions:3: expected/],
    ['an empty field', 'u-1, , orders, refund -> allow\n', /bad\.decisions:1: expected/],
    ['unknown outcome', 'u-1, m-1, orders, refund -> maybe\n', /bad\.decisions:1: a decision ends in -> allow or -> deny, not "-> maybe"/],
    ['two arrows', 'u-1, m-1, orders, refund -> allow -> deny\n', /bad\.decisions:1: expected/],
    ['short p line', 'p, clerk, m-1, orders, refund\nu-1, m-1, orders, refund -> allow\n', /bad\.decisions:1: expected p, <sub-role or user id>/],
    ['p line with an odd effect', 'p, clerk, m-1, orders, refund, maybe\nu-1, m-1, orders, refund -> allow\n', /the effect must be allow or deny/],
    ['long g line', 'g, u-1, clerk, m-1, extra\nu-1, m-1, orders, refund -> allow\n', /bad\.decisions:1: expected g, <user id or sub-role>, <sub-role>, <domain>/],
    ['no decisions', '# nothing\np, clerk, m-1, orders, refund, allow\n', /holds no decision/],
  ]
  for (const [name, text, message] of broken) {
    const result = await cli('model', 'check', '--decisions', write('bad.decisions', text))
    t.equal(result.code, 1, `${name}: exit 1`)
    t.match(result.err, message, name)
    t.notMatch(result.err, STACK_FRAME, `${name}: no stack trace`)
    t.equal(result.out, '', `${name}: nothing claims success`)
  }
  const badPolicy = await cli('model', 'check', '--decisions', bare, '--policy', write('bad.csv', 'p, clerk, m-1, orders, refund, allow\nclerk, m-1\n'))
  t.equal(badPolicy.code, 1)
  t.match(badPolicy.err, /bad\.csv:2: a policy line starts with p or g/)
  const missing = await cli('model', 'check', '--decisions', join(repositoryRoot, 'nope.decisions'))
  t.equal(missing.code, 1)
  t.match(missing.err, /cannot read the decisions file at .*nope\.decisions/)
  t.equal((await cli('model', 'check', '--decision', bare)).code, 2, 'a misspelt option')
})

t.test('--against lists every decision that differs between two models', async (t) => {
  const write = writer(tempDir(t, 'model-check-'))
  const cli = cliFor(NO_DATABASE)
  const same = await cli('model', 'check', '--decisions', shippedDecisions, '--against', write('copy.conf', reference))
  t.equal(same.code, 0, same.err)
  t.match(same.out, /compared with .*copy\.conf: 10 subjects x 3 domains x 13 pairs = 390 requests; no decision differs/)

  const noDeny = write('no-deny.conf', withoutDeny)
  const changed = await cli('model', 'check', '--model', noDeny, '--policy', write('policy.csv', decisionsText.replace(/^.*->.*$/gm, '')), '--against', shippedModel)
  t.equal(changed.code, 1)
  t.match(changed.out, /390 requests; 11 differ \(.*model\.conf -> .*no-deny\.conf\):/)
  const listed = changed.out.split('\n').filter((l) => l.startsWith('  '))
  t.same(
    listed,
    [
      '  clerk, m-1, reports, export: deny -> allow',
      '  senior_clerk, m-1, reports, export: deny -> allow',
      '  user-alice, m-1, orders, delete: deny -> allow',
      '  user-alice, m-1, reports, export: deny -> allow',
      '  user-bob, m-1, orders, refund: deny -> allow',
      '  user-bob, m-1, reports, export: deny -> allow',
      '  user-carol, m-1, reports, export: deny -> allow',
      '  user-olga, global, merchant, suspend: deny -> allow',
      '  user-olga, m-1, merchant, suspend: deny -> allow',
      '  user-olga, m-2, merchant, suspend: deny -> allow',
      '  user-olga, m-2, payouts, view: deny -> allow',
    ],
    'every difference, old decision -> new',
  )
  t.equal(changed.err, `model check failed: 11 decisions differ from ${shippedModel}`)

  const broken = await cli('model', 'check', '--decisions', shippedDecisions, '--against', write('broken.conf', reference.replace('r.act == p.act &&', 'r.act == p.act && nosuch(r.sub) &&')))
  t.equal(broken.code, 1)
  t.match(broken.err, /--against .*broken\.conf: the model cannot evaluate/)
  t.equal(broken.out, '')
})

t.test('on the stored policy', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const grant = await ta.call({
    method: 'POST',
    url: '/v2/admin/permissions/roles/clerk/grant',
    body: { command: 'grant-role-permission', data: { obj: 'permission', act: 'read' } },
  })
  t.equal(grant.statusCode, 200, grant.body)
  const clerk = await register(ta, { email: 'clerk@example.com', sub_role_code: 'clerk' })
  const other = await register(ta, { email: 'other@example.com', sub_role_code: 'clerk' })
  const deny = await ta.call({
    method: 'POST',
    url: `/v2/admin/permissions/users/${other.id}/deny`,
    body: { command: 'deny-user-permission', data: { obj: 'permission', act: 'read' } },
  })
  t.equal(deny.statusCode, 200, deny.body)

  const write = writer(tempDir(t, 'model-check-'))
  const cli = cliOn(db)
  const decisions = write(
    'stored.decisions',
    `# user ids as stored\n${clerk.id}, global, permission, read -> allow\n${other.id}, global, permission, read -> deny\n${clerk.id}, global, admin, register -> deny\n`,
  )
  const held = await cli('model', 'check', '--decisions', decisions)
  t.equal(held.code, 0, held.err)
  t.match(held.out, /the stored policy loads through it: 2 p rules \(overrides included\), 3 g rules/)
  t.match(held.out, /all 3 hold/)

  const noDeny = write('no-deny.conf', withoutDeny)
  const failed = await cli('model', 'check', '--model', noDeny, '--decisions', decisions)
  t.equal(failed.code, 1)
  t.match(failed.out, `stored.decisions:3: ${other.id}, global, permission, read -> deny, but the model says allow`)

  const compared = await cli('model', 'check', '--model', noDeny, '--against', shippedModel)
  t.equal(compared.code, 1)
  const catalog = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM permission_catalog')).rows[0]?.n ?? 0
  t.ok(catalog > 1, 'the catalog is there')
  // Subjects: the two users, root, clerk and super_admin; domains: global only; pairs: the catalog's.
  t.match(compared.out, new RegExp(`5 subjects x 1 domains x ${catalog} pairs = ${5 * catalog} requests; 1 differ`))
  t.match(compared.out, `  ${other.id}, global, permission, read: deny -> allow`)
})

t.test('as CI runs it: the command line in a process of its own', async (t) => {
  const write = writer(tempDir(t, 'model-check-'))
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', APS_TEST_PGLITE_INITDB: process.env.APS_TEST_PGLITE_INITDB ?? '', DATABASE_URL: 'pglite://memory', LOG_LEVEL: 'silent', ...COMPILE_CACHE_ENV }
  const main = (...args: string[]) =>
    run(process.execPath, [...TEST_NODE_ARGS, 'src/cli/main.ts', 'model', 'check', ...args], { cwd: repositoryRoot, env, timeout: 60_000 })
  const passed = await main('--decisions', 'model.decisions')
  t.match(passed.stdout, /all \d+ hold/)
  const failed = await main('--decisions', 'model.decisions', '--model', write('no-deny.conf', withoutDeny)).then(
    () => null,
    (error: { code: number; stdout: string; stderr: string }) => error,
  )
  t.equal(failed?.code, 1, 'exit code 1')
  t.match(failed?.stderr, /^model check failed: 5 of \d+ decisions in model\.decisions do not hold\n$/)
})
