import type { LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { runCli } from '../../src/cli/run.js'
import { ACCOUNT_CEILING_FACTOR, LOGIN_FAILURE_WINDOW_SECONDS } from '../../src/domain/loginLimits.js'
import { ROOT_EMAIL, ROOT_PASSWORD, TEST_SECRET, backend, buildTestApp, freshDatabase, onboard, postgresUrl, secondConnection, type TestApp } from '../helper.js'

/**
 * The per-account login limit: failures counted in the database, per
 * lower-cased e-mail and client address, in a sliding window, under a
 * higher ceiling per account; change-password's check of the current
 * password counts with them.
 */

const LIMIT = 3
const ENV = { LOGIN_ACCOUNT_FAILURES: String(LIMIT) }
/** The guesser's address and the owner's. */
const A = '198.51.100.7'
const B = '192.0.2.44'

const login = (ta: TestApp, email: string, password: string, from = A): Promise<LightMyRequestResponse> =>
  ta.call({ method: 'POST', url: '/v2/auth/login', token: null, remoteAddress: from, body: { command: 'login', data: { email, password } } })

const changePassword = (ta: TestApp, token: string, current: string, next: string, from = A): Promise<LightMyRequestResponse> =>
  ta.call({
    method: 'POST',
    url: '/v2/profile/password',
    token,
    remoteAddress: from,
    body: { command: 'change-password', data: { current_password: current, new_password: next } },
  })

/** Counts the password checks the service makes (argon2 verifies). */
function countVerifies(ta: TestApp): { count: () => number } {
  const hasher = ta.service.passwords
  const original = hasher.verify.bind(hasher)
  let calls = 0
  hasher.verify = (stored, password) => {
    calls++
    return original(stored, password)
  }
  return { count: () => calls }
}

const retryAfter = (res: LightMyRequestResponse): number => Number(res.headers['retry-after'])

t.test('per-account login limit', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db, env: ENV })
  await onboard(ta, 'm1')
  const verifies = countVerifies(ta)
  /** Moves one e-mail's counted failures back in time: the window's clock is the database's. */
  const age = (email: string, seconds: number, which: 'all' | 'oldest' = 'all') =>
    db.query(
      `UPDATE login_failures SET failed_at = failed_at - make_interval(secs => $2)
        WHERE email = lower($1) AND ($3 = 'all' OR id = (SELECT min(id) FROM login_failures WHERE email = lower($1)))`,
      [email, seconds, which],
    )
  /** Puts one e-mail's oldest counted failure where it leaves the window in `seconds`. */
  const leavesIn = (email: string, seconds: number) =>
    db.query(
      `UPDATE login_failures SET failed_at = now() - make_interval(secs => $2)
        WHERE id = (SELECT min(id) FROM login_failures WHERE email = lower($1))`,
      [email, LOGIN_FAILURE_WINDOW_SECONDS - seconds],
    )
  const counted = async (email: string) =>
    (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM login_failures WHERE email = lower($1)', [email])).rows[0]?.n

  t.test('after the limit the account answers 429 with Retry-After, without checking the password', async (t) => {
    const statuses: number[] = []
    for (let i = 0; i < LIMIT; i++) statuses.push((await login(ta, ROOT_EMAIL, `wrong-${i}`)).statusCode)
    t.same(statuses, [401, 401, 401], `${LIMIT} failures are checked`)
    t.equal(verifies.count(), LIMIT)

    const limited = await login(ta, ROOT_EMAIL, 'wrong-again')
    t.equal(limited.statusCode, 429)
    t.equal(limited.json().response_code, '602')
    t.type(limited.json().response_text, 'string')
    t.notOk('data' in limited.json())
    const wait = retryAfter(limited)
    t.ok(Number.isInteger(wait) && wait > LOGIN_FAILURE_WINDOW_SECONDS - 30 && wait <= LOGIN_FAILURE_WINDOW_SECONDS, `Retry-After ${wait} s: until the oldest failure leaves the 15 minutes`)
    t.match(limited.json().response_text, new RegExp(`${wait - 1} s|${wait} s`), 'the text says how long too')

    const right = await login(ta, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(right.statusCode, 429, 'the right password is refused too while limited')
    t.notMatch(right.body, /access_token/)
    t.equal((await login(ta, 'ROOT@Example.com', ROOT_PASSWORD)).statusCode, 429, 'in any case of the e-mail')
    t.equal(verifies.count(), LIMIT, 'no password was checked while limited')
    t.equal(await counted(ROOT_EMAIL), LIMIT, 'refused attempts are not counted (the limit is already reached)')

    const other = await login(ta, 'owner@m1.example', 'merchant-pass-1')
    t.equal(other.statusCode, 200, 'another account is not affected')
  })

  t.test("a guesser's failures limit the guesser's address, not the owner's", async (t) => {
    t.equal((await login(ta, ROOT_EMAIL, ROOT_PASSWORD)).statusCode, 429, 'the address that failed is limited')
    const before = verifies.count()
    const owner = await login(ta, ROOT_EMAIL, ROOT_PASSWORD, B)
    t.equal(owner.statusCode, 200, 'a login from another address succeeds')
    t.match(owner.json().data, { access_token: String })
    t.equal(verifies.count(), before + 1)
    const again = await login(ta, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(again.statusCode, 429, "the owner's success did not lift the guesser's limit")
    t.equal(again.json().response_code, '602')
    t.ok(retryAfter(again) > 0)
    t.equal((await login(ta, ROOT_EMAIL, 'wrong', B)).statusCode, 401, 'a failure from the other address is checked and counted for it alone')
    const rows = await db.query<{ ip: string; n: number }>(
      'SELECT host(ip) AS ip, count(*)::int AS n FROM login_failures WHERE email = lower($1) GROUP BY ip ORDER BY ip',
      [ROOT_EMAIL],
    )
    t.same(rows.rows, [{ ip: B, n: 1 }, { ip: A, n: LIMIT }], 'each failure records its address')
    await db.query('DELETE FROM login_failures WHERE email = lower($1) AND ip = $2::inet', [ROOT_EMAIL, B])
  })

  t.test('IPv6 addresses are counted by their /64', async (t) => {
    const email = 'owner@m1.example'
    for (let i = 1; i <= LIMIT; i++) t.equal((await login(ta, email, `wrong-${i}`, `2001:db8:7:1::${i}`)).statusCode, 401)
    t.equal((await login(ta, email, 'merchant-pass-1', '2001:db8:7:1:ffff::9')).statusCode, 429, 'another address in the same /64 is limited')
    t.equal((await login(ta, email, 'merchant-pass-1', '2001:db8:7:2::1')).statusCode, 200, 'the next /64 is not')
    await db.query('DELETE FROM login_failures WHERE email = lower($1)', [email])
  })

  t.test('e-mails with no account are counted the same way', async (t) => {
    const ghost = 'Nobody@Nowhere.example'
    const statuses: number[] = []
    for (let i = 0; i < LIMIT + 1; i++) statuses.push((await login(ta, i % 2 === 0 ? ghost : ghost.toLowerCase(), 'whatever-1')).statusCode)
    t.same(statuses, [401, 401, 401, 429], 'the same answers as for an existing account')
    t.equal(await counted(ghost), LIMIT)
    const known = await login(ta, ROOT_EMAIL, 'wrong')
    const unknown = await login(ta, ghost, 'wrong')
    t.equal(unknown.statusCode, known.statusCode)
    t.equal(unknown.json().response_code, known.json().response_code)
    t.ok(retryAfter(unknown) > 0, 'with Retry-After')
  })

  t.test('the window slides: each failure leaving it admits one more attempt', async (t) => {
    await leavesIn(ROOT_EMAIL, 60)
    const soon = await login(ta, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(soon.statusCode, 429)
    t.ok(retryAfter(soon) >= 59 && retryAfter(soon) <= 60, `Retry-After ${retryAfter(soon)} s: the oldest failure leaves in a minute`)

    await age(ROOT_EMAIL, 60, 'oldest')
    t.equal((await login(ta, ROOT_EMAIL, 'still-wrong')).statusCode, 401, 'the oldest failure left: one attempt is checked')
    const again = await login(ta, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(again.statusCode, 429, 'and its failure fills the window again')
    t.ok(retryAfter(again) > LOGIN_FAILURE_WINDOW_SECONDS - 30)

    await age(ROOT_EMAIL, LOGIN_FAILURE_WINDOW_SECONDS)
    const ok = await login(ta, ROOT_EMAIL, ROOT_PASSWORD)
    t.equal(ok.statusCode, 200, 'once the window has passed the right password logs in')
    const expired = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM login_failures WHERE failed_at <= now() - make_interval(secs => $1)',
      [LOGIN_FAILURE_WINDOW_SECONDS],
    )
    t.equal(expired.rows[0]?.n, 0, 'the attempt pruned the rows that left the window')
  })

  t.test('a success is not a failure, and does not clear earlier ones', async (t) => {
    const email = 'owner@m1.example'
    t.equal((await login(ta, email, 'wrong-1')).statusCode, 401)
    t.equal((await login(ta, email, 'wrong-2')).statusCode, 401)
    t.equal(await counted(email), 2)
    t.equal((await login(ta, email, 'merchant-pass-1')).statusCode, 200)
    t.equal(await counted(email), 2, 'the success left no row and removed none')
    t.equal((await login(ta, email, 'wrong-3')).statusCode, 401, 'the third failure is still checked')
    t.equal((await login(ta, email, 'merchant-pass-1')).statusCode, 429, 'then the account is limited')
  })

  t.test('a burst of concurrent attempts gets exactly the limit of checks', async (t) => {
    const email = 'burst@nowhere.example'
    const before = verifies.count()
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => login(ta, email, `guess-${i}`)))
    const statuses = answers.map((a) => a.statusCode).sort()
    t.same(statuses, [...Array<number>(LIMIT).fill(401), ...Array<number>(12 - LIMIT).fill(429)])
    t.equal(verifies.count() - before, LIMIT, 'only the admitted attempts were checked')
  })

  t.test('the token answer is not to be cached', async (t) => {
    await db.query('DELETE FROM login_failures')
    const fresh = await login(ta, 'owner@m1.example', 'merchant-pass-1')
    t.equal(fresh.statusCode, 200)
    t.match(fresh.json().data, { access_token: String })
    t.equal(fresh.headers['cache-control'], 'no-store')
    t.equal(fresh.headers.pragma, 'no-cache')
  })
})

t.test('two servers over one PostgreSQL schema share the count', async (t) => {
  if (backend !== 'postgres') {
    t.pass('needs PostgreSQL (DATABASE_URL=postgres://…); the embedded store serves one process')
    return
  }
  const db = await freshDatabase(t)
  const a = await buildTestApp(t, { db, env: ENV })
  const b = await buildTestApp(t, { db: secondConnection(t, db), env: ENV })
  const checksA = countVerifies(a)
  const checksB = countVerifies(b)

  t.equal((await login(a, ROOT_EMAIL, 'wrong-1')).statusCode, 401)
  t.equal((await login(b, ROOT_EMAIL, 'wrong-2')).statusCode, 401)
  t.equal((await login(a, ROOT_EMAIL, 'wrong-3')).statusCode, 401)
  const onB = await login(b, ROOT_EMAIL, ROOT_PASSWORD)
  t.equal(onB.statusCode, 429, 'the failures on the other server count')
  t.ok(retryAfter(onB) > 0)
  t.equal((await login(a, ROOT_EMAIL, ROOT_PASSWORD)).statusCode, 429)
  t.equal(checksA.count() + checksB.count(), LIMIT)

  const email = 'spray@nowhere.example'
  const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => login(i % 2 === 0 ? a : b, email, `guess-${i}`)))
  t.equal(answers.filter((r) => r.statusCode === 401).length, LIMIT, 'a burst over both servers gets exactly the limit of checks')
  t.equal(answers.filter((r) => r.statusCode === 429).length, 16 - LIMIT)
  t.equal(checksA.count() + checksB.count(), 2 * LIMIT)
})

t.test('a ceiling per account bounds a guesser rotating addresses; networks the account logged in from pass it', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db, env: ENV })
  await onboard(ta, 'm2')
  const email = 'owner@m2.example'
  const ceiling = LIMIT * ACCOUNT_CEILING_FACTOR
  t.equal((await login(ta, email, 'merchant-pass-1', B)).statusCode, 200, 'the owner logs in from B')
  const statuses = new Set<number>()
  for (let i = 0; i < ceiling; i++) statuses.add((await login(ta, email, `guess-${i}`, `203.0.113.${Math.floor(i / LIMIT) + 1}`)).statusCode)
  t.same([...statuses], [401], `${ceiling} failures from ${ACCOUNT_CEILING_FACTOR} addresses, each under its own limit, are checked`)
  const fresh = await login(ta, email, 'merchant-pass-1', '203.0.113.200')
  t.equal(fresh.statusCode, 429, 'past the ceiling a new address is refused, whatever the password')
  t.equal(fresh.json().response_code, '602')
  t.ok(retryAfter(fresh) > LOGIN_FAILURE_WINDOW_SECONDS - 60)
  t.equal((await login(ta, email, 'merchant-pass-1', B)).statusCode, 200, 'the network the owner logged in from still gets in')
  t.equal((await login(ta, ROOT_EMAIL, ROOT_PASSWORD, '203.0.113.200')).statusCode, 200, 'another account is not affected')
})

t.test("change-password's check of the current password is limited with the account's logins", async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db, env: ENV })
  const owner = await onboard(ta, 'm3')
  const token = ta.tokenFor(owner)
  t.equal((await login(ta, owner.email, 'wrong-login')).statusCode, 401, 'a failed login')
  for (let i = 1; i < LIMIT; i++) {
    const wrong = await changePassword(ta, token, `wrong-current-${i}`, 'a-new-passphrase-1')
    t.equal(wrong.statusCode, 400)
    t.equal(wrong.json().response_code, '109')
  }
  const limited = await changePassword(ta, token, 'merchant-pass-1', 'a-new-passphrase-1')
  t.equal(limited.statusCode, 429, 'the limit is reached: even the right current password is not checked')
  t.equal(limited.json().response_code, '602')
  t.ok(retryAfter(limited) > LOGIN_FAILURE_WINDOW_SECONDS - 60, `Retry-After ${retryAfter(limited)} s`)
  t.equal((await login(ta, owner.email, 'merchant-pass-1')).statusCode, 429, 'login from that address is limited too')
  t.equal((await ta.call({ method: 'GET', url: '/v2/profile', token })).statusCode, 200, 'the token still works')

  const changed = await changePassword(ta, token, 'merchant-pass-1', 'a-new-passphrase-1', B)
  t.equal(changed.statusCode, 200, 'from another address the change goes through')
  const left = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM login_failures WHERE email = lower($1)', [owner.email])
  t.equal(left.rows[0]?.n, 0, "a change clears the account's failures: they were guesses at a password that is gone")
  t.equal((await login(ta, owner.email, 'a-new-passphrase-1')).statusCode, 200, 'the limited address logs in with the new password')
})

t.test('password reset on the command line lifts the limit', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db, env: ENV })
  for (let i = 0; i < LIMIT; i++) t.equal((await login(ta, ROOT_EMAIL, `wrong-${i}`)).statusCode, 401)
  for (let i = 0; i < LIMIT; i++) t.equal((await login(ta, ROOT_EMAIL, `wrong-${i}`, `2001:db8:${i}::1`)).statusCode, 401)
  t.equal((await login(ta, ROOT_EMAIL, ROOT_PASSWORD)).statusCode, 429)
  const out: string[] = []
  const code = await runCli(['password', 'reset', '--email', ROOT_EMAIL.toUpperCase()], {
    env: { DATABASE_URL: postgresUrl ?? 'pglite://memory', JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...ENV },
    db,
    io: { out: (line) => out.push(line), err: (line) => out.push(line) },
  })
  t.equal(code, 0, out.join('\n'))
  const printed = /new password for .*: (\S+)$/.exec(out[0] ?? '')?.[1] ?? ''
  t.ok(printed.length >= 20)
  const left = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM login_failures WHERE email = lower($1)', [ROOT_EMAIL])
  t.equal(left.rows[0]?.n, 0, 'the failures of every address are gone')
  t.equal((await login(ta, ROOT_EMAIL, printed)).statusCode, 200, 'the limited address logs in with the printed password')
})
