/**
 * Fuzzing every route the app declares (read from the app itself, so a new
 * route is fuzzed without touching this file): wrong types, empty, huge and
 * odd strings (NUL, lone surrogates, bidi and zero-width characters),
 * `__proto__` and `constructor` keys, deep nesting, malformed JSON and
 * content types, odd query strings and path segments, with valid tokens of
 * four kinds of caller and a dozen invalid ones. Whatever arrives:
 *
 * - never a 5xx, except 503 `902`, the documented answer to a `min_revision`
 *   this server has not reached;
 * - every answer that is not a success is the error envelope, and no answer
 *   carries internals (stack frames, SQL, table names, source paths);
 * - a refused request changes no row of any table (each guarded table's row
 *   count and newest row version, compared around every request), and
 *   nothing reaches `Object.prototype`.
 *
 * At the end the audit chain must verify and the in-memory policy must
 * decide exactly as a service loaded fresh from the database.
 *
 * Fixed seed and a fixed number of cases per route, so a run fuzzes the
 * same requests on any machine; the time budget only stops a run that
 * would otherwise take far too long. For a longer search on a workstation:
 * FUZZ_SEED, FUZZ_RUNS_PER_ROUTE and FUZZ_BUDGET_MS (ms).
 */
import fc from 'fast-check'
import type { LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { verifyAudit } from '../../src/commands/verifyAudit.js'
import { BODY_LIMIT } from '../../src/http/app.js'
import type { Account } from '../../src/domain/principals.js'
import { ROOT_EMAIL, TEST_SECRET, backend, buildTestApp, buildTestService, onboard, register, type TestApp } from '../helper.js'
import { INTERNALS, errorShapeProblems } from '../support/envelope.js'
import { decodePayload, nowSeconds, rawToken, sign } from '../support/jwt.js'
import { apiRoutes, changedTables, cheapPasswords, declaredRoutes, fingerprint, type DeclaredRoute, type SchemaNode } from '../support/security.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('request shapes fuzzed over every route')

const SEED = Number(process.env.FUZZ_SEED ?? 20261124)
/**
 * Sized for CI, where this file is one of the suite's slowest: about 1,400
 * cases over the ~70 routes. A count rather than a time budget, so every
 * route gets the same cases whatever the machine's load.
 */
const CI_RUNS_PER_ROUTE = 20
const RUNS_PER_ROUTE = Number(process.env.FUZZ_RUNS_PER_ROUTE ?? CI_RUNS_PER_ROUTE)
/** A bound on the whole fuzz loop that CI's count stays well within; a longer search raises it (tap's limit for the file is 180 s). */
const FUZZ_BUDGET_MS = Number(process.env.FUZZ_BUDGET_MS ?? 60_000)

// ---------------------------------------------------------------- odd inputs

/** Strings that have broken parsers, validators, databases and logs before. */
const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  'x\udc00y',
  '\u202e',
  'admin\u202enimda',
  '\u200b',
  'or\u200bders',
  '\u200d',
  '\ufeff',
  '\u2066x\u2069',
  '\r\n',
  '\t',
  '\u0085',
  '\\',
  '"',
  "'",
  '`',
  '%00',
  '%',
  '../..',
  '..\\..',
  '$ne',
  '{"$gt":""}',
  'null',
  'undefined',
  'true',
  '0',
  '-1',
  '1e309',
  'NaN',
  '9'.repeat(400),
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '<script>alert(1)</script>',
  '${7*7}',
  '{{7*7}}',
  "' OR '1'='1",
  'global',
  'GLOBAL',
  'Global',
  'super_admin',
  'SUPER_ADMIN',
  '*',
  'orders,read',
  'a'.repeat(300),
  '\uff4f\uff52\uff44\uff45\uff52\uff53',
  '\u0130',
  '\u00df',
  '\ud83d\ude42',
  'e\u0301',
]

/** Percent-escapes that decode to nothing valid, or to something a path must not contain. */
const RAW_ESCAPES = [
  '%',
  '%%',
  '%zz',
  '%0',
  '%00',
  '%E0%A4%A',
  '%ED%A0%80',
  '%C0%80',
  '%C0%AF',
  '%FF',
  '%FE%FF',
  '%2e%2e',
  '%2F',
  '%252F',
  '..',
  '.',
  '%u0041',
  '+',
  '%20',
  '%0D%0A',
  '%E2%80%AE',
  '%E2%80%8B',
  ';a=b',
]

/** Keys that, copied carelessly into an object, reach its prototype or shadow what code reads. */
const ODD_KEYS = ['constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', 'domian', '', ' ', 'OBJ', 'a.b', '$where', 'password_hash', 'is_root', 'principal_type', 'parent_role', 'created_by', 'id']
const PROTO_INJECTIONS = [
  '"__proto__":{"polluted":"yes","is_root":true,"principal_type":"system_owner"}',
  '"constructor":{"prototype":{"polluted":"yes"}}',
  '"__proto__":null',
  '"__proto__":[]',
]

const CONTENT_TYPES = [
  undefined,
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/jsonx',
  'multipart/form-data; boundary=x',
  'application/json;;',
  '*/*',
  'application/vnd.api+json',
  '',
]

/** Characters a real HTTP/1.1 header value can carry (Node's parser refuses the rest before any code runs). */
const HEADER_CHARS = ['\t', ...Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)), ...Array.from({ length: 0x80 }, (_, i) => String.fromCharCode(0x80 + i))]
const headerText = fc.string({ unit: fc.constantFrom(...HEADER_CHARS), maxLength: 40 })

/** UTF-8 bytes of a string, lone surrogates included (as an unpaired 3-byte sequence, which decoders refuse). */
function wtf8(text: string): number[] {
  const bytes: number[] = []
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i)
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (next - 0xdc00)
        i++
      }
    }
    if (cp < 0x80) bytes.push(cp)
    else if (cp < 0x800) bytes.push(0xc0 | (cp >> 6), 0x80 | (cp & 63))
    else if (cp < 0x10000) bytes.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63))
    else bytes.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63))
  }
  return bytes
}

/** Percent-encodes anything, unlike encodeURIComponent, which throws on lone surrogates. */
function pct(text: string): string {
  return wtf8(text)
    .map((b) => (b < 0x80 && /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`))
    .join('')
}

function decodedOrRaw(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

// ---------------------------------------------------------------- the world

interface Credential {
  label: string
  /** A token the service accepts. */
  valid: boolean
  /** The Authorization header, or undefined for none. */
  header: string | undefined
}

interface FuzzWorld {
  ta: TestApp
  credentials: Credential[]
  /** Plausible values per field name, mostly valid, so that a good share of requests get past validation. */
  plausible: Map<string, fc.Arbitrary<string>>
  anyPlausible: fc.Arbitrary<string>
  /** An obj/act pair of the catalog: fields drawn one by one rarely make one. */
  pair: fc.Arbitrary<{ obj: string; act: string }>
}

/** The callers' own password is in no pool: a fuzzed password change or deactivation must not lock the fuzz out. */
const CALLER_PASSWORD = 'caller-only-passphrase-9'
/** The targets' password is in the pools, so logins and password changes of targets can succeed. */
const TARGET_PASSWORD = 'admin-pass-123'

/** Mostly valid values, sometimes one that is wrong in a plausible way. */
const mostly = (valid: readonly string[], wrong: readonly string[] = []): fc.Arbitrary<string> =>
  wrong.length === 0 ? fc.constantFrom(...valid) : fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...valid) }, { weight: 1, arbitrary: fc.constantFrom(...wrong) })

async function buildWorld(ta: TestApp): Promise<FuzzWorld> {
  const m1Owner = await onboard(ta, 'm1')
  const m2Owner = await onboard(ta, 'm2')
  const ownerToken = ta.tokenFor(m1Owner)
  const manager = await register(ta, { email: 'manager@m1.example', sub_role_code: 'manager', merchant_id: 'm1', password: CALLER_PASSWORD }, ownerToken)
  const staff = await register(ta, { email: 'staff@platform.example', sub_role_code: 'support', password: CALLER_PASSWORD })
  const clerk = await register(ta, { email: 'clerk@m1.example', sub_role_code: 'clerk', merchant_id: 'm1', password: TARGET_PASSWORD }, ownerToken)
  const m2Clerk = await register(ta, { email: 'clerk@m2.example', sub_role_code: 'clerk', password: TARGET_PASSWORD }, ta.tokenFor(m2Owner))
  const staffTarget = await register(ta, { email: 'agent@platform.example', sub_role_code: 'support', password: TARGET_PASSWORD })
  const grant = async (role: string, obj: string, act: string, domain: string, token: string) => {
    const res = await ta.call({ method: 'POST', url: `/v2/admin/permissions/roles/${role}/grant`, token, body: { command: 'grant-role-permission', data: { obj, act, domain } } })
    if (res.statusCode !== 200) throw new Error(`setup grant failed: ${res.body}`)
  }
  for (const [obj, act] of [
    ['permission', 'read'],
    ['permission', 'assign'],
    ['permission', 'revoke'],
    ['admin', 'register'],
    ['orders', 'read'],
  ] as const) {
    await grant('manager', obj, act, 'm1', ownerToken)
  }
  await grant('support', 'permission', 'read', 'global', ta.rootToken)
  await grant('support', 'orders', 'read', 'global', ta.rootToken)

  const valid = (account: Account) => `Bearer ${ta.tokenFor(account)}`
  const rootBearer = `Bearer ${ta.rootToken}`
  const claims = (account: Pick<Account, 'id' | 'principal_type' | 'merchant_id'>, extra: Record<string, unknown> = {}) => ({
    sub: account.id,
    principal_type: account.principal_type,
    ...(account.merchant_id !== null ? { merchant_id: account.merchant_id } : {}),
    exp: nowSeconds() + 3600,
    ...extra,
  })
  const unknownId = '00000000-0000-4000-8000-000000000000'
  const credentials: Credential[] = [
    { label: 'system-owner root', valid: true, header: rootBearer },
    { label: 'merchant root (m1)', valid: true, header: valid(m1Owner) },
    { label: 'merchant admin (m1 manager)', valid: true, header: valid(manager) },
    { label: 'system-owner staff', valid: true, header: valid(staff) },
    { label: 'none', valid: false, header: undefined },
    { label: 'empty', valid: false, header: '' },
    { label: 'Bearer without token', valid: false, header: 'Bearer ' },
    { label: 'Basic', valid: false, header: 'Basic cm9vdDpyb290' },
    { label: 'lower-case scheme', valid: false, header: `bearer ${ta.rootToken}` },
    { label: 'token without scheme', valid: false, header: ta.rootToken },
    { label: 'bad signature', valid: false, header: `${rootBearer.slice(0, -2)}${rootBearer.endsWith('A') ? 'BB' : 'AA'}` },
    { label: 'two tokens', valid: false, header: `${rootBearer} ${ta.rootToken}` },
    { label: 'expired', valid: false, header: `Bearer ${sign(claims(ta.root, { exp: nowSeconds() - 60 }), TEST_SECRET)}` },
    { label: 'not yet valid', valid: false, header: `Bearer ${sign(claims(ta.root, { nbf: nowSeconds() + 3600 }), TEST_SECRET)}` },
    { label: 'alg none', valid: false, header: `Bearer ${rawToken({ alg: 'none', typ: 'JWT' }, claims(ta.root))}` },
    { label: 'other secret', valid: false, header: `Bearer ${sign(claims(ta.root), 'another-secret-that-is-long-enough-000')}` },
    { label: 'HS512', valid: false, header: `Bearer ${sign(claims(ta.root), TEST_SECRET, 'HS512')}` },
    { label: 'unknown account', valid: false, header: `Bearer ${sign(claims({ id: unknownId, principal_type: 'system_owner', merchant_id: null }), TEST_SECRET)}` },
    { label: 'merchant claiming system owner', valid: false, header: `Bearer ${sign(claims({ ...m1Owner, principal_type: 'system_owner', merchant_id: null }), TEST_SECRET)}` },
    { label: 'merchant claiming another merchant', valid: false, header: `Bearer ${sign(claims({ ...clerk, merchant_id: 'm2' }), TEST_SECRET)}` },
    { label: 'sub of wrong type', valid: false, header: `Bearer ${sign({ ...claims(ta.root), sub: 42 }, TEST_SECRET)}` },
    { label: 'no exp', valid: false, header: `Bearer ${sign({ sub: ta.root.id, principal_type: 'system_owner' }, TEST_SECRET)}` },
    { label: 'huge', valid: false, header: `Bearer ${'a'.repeat(20_000)}.${'b'.repeat(100)}.c` },
    { label: 'garbage segments', valid: false, header: 'Bearer a.b.c' },
  ]

  // Targets only: the callers' own ids are left out so that no fuzzed deactivation or role change locks the fuzz out.
  const targets = [m2Owner.id, clerk.id, m2Clerk.id, staffTarget.id]
  const ids = mostly(targets, [unknownId, clerk.id.toUpperCase(), `${clerk.id} `, clerk.id.slice(1), 'not-a-uuid'])
  const catalog = ta.service.engine.catalogEntries()
  const roles = mostly(['clerk', 'support', 'reader', 'fresh_role'], ['super_admin', 'Clerk', 'manager'])
  const passwords = mostly([TARGET_PASSWORD, 'a-long-enough-passphrase'], ['short', 'x'.repeat(300)])
  const numbers = mostly(['1', '2', '20', '100'], ['0', '101', '-1', '1.5', '1e3', '99999999999999999999', '0x10'])
  const fresh = (prefix: string, suffix = '') => fc.nat(999_999).map((n) => `${prefix}${n}${suffix}`)
  const plausible = new Map<string, fc.Arbitrary<string>>([
    ['obj', mostly([...new Set(catalog.map((e) => e.obj))], ['unknown'])],
    ['act', mostly([...new Set(catalog.map((e) => e.act))], ['unknown'])],
    ['domain', mostly(['global', 'm1', 'm2'], ['m404', 'GLOBAL', 'M1'])],
    ['user_id', ids],
    ['userId', ids],
    ['merchant_id', fc.oneof({ weight: 3, arbitrary: fresh('fuzz-m') }, { weight: 2, arbitrary: mostly(['m1', 'm2'], ['global', 'm404', 'GLOBAL']) })],
    ['email', fc.oneof({ weight: 3, arbitrary: fresh('fuzz', '@example.com') }, { weight: 2, arbitrary: mostly(['clerk@m1.example', 'CLERK@M2.EXAMPLE', 'agent@platform.example', ROOT_EMAIL], ['not-an-email', 'a@b']) })],
    ['password', passwords],
    ['current_password', passwords],
    ['new_password', passwords],
    ['name', mostly(['Ana', 'María José', 'x'])],
    ['phone', mostly(['+1 555 0100'], ['abc'])],
    ['sub_role_code', roles],
    ['subRoleCode', roles],
    ['target_type', mostly(['role', 'user', 'permission'], ['other'])],
    ['target_id', mostly(['clerk', clerk.id, 'orders:read'])],
    ['action', mostly(['grant', 'revoke', 'deny', 'register', 'onboard', 'catalog_added'], ['other'])],
    ['page', numbers],
    ['page_size', numbers],
    ['min_revision', mostly(['0', '1', '2'], ['20', '100', '99999999999999999999', '-1'])],
    ['lang', mostly(['en', 'es', 'es-MX'], ['fr', '', 'xx_YY'])],
  ])
  const anyPlausible = fc.oneof(...plausible.values())
  const pair = fc.constantFrom(...catalog.map((e) => ({ obj: e.obj, act: e.act })))
  return { ta, credentials, plausible, anyPlausible, pair }
}

// ---------------------------------------------------------------- generators

const oddString = fc.constantFrom(...ODD_STRINGS)
const binaryString = fc.string({ unit: 'binary', maxLength: 24 })
const HUGE_STRING = 'x'.repeat(200_000)

/** Anything a field should not hold: odd text, wrong types, nested JSON. */
const junkValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: oddString },
  { weight: 2, arbitrary: binaryString },
  { weight: 2, arbitrary: fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -0, 1, -1, 2 ** 53, 1e308, 0.5)) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' }) },
  { weight: 1, arbitrary: fc.constant(HUGE_STRING) },
)

/** The pool of a field by its name, or by what its name says it holds (`*_id`, `*password*`, `*email*`). */
function plausibleFor(w: FuzzWorld, name: string): fc.Arbitrary<string> {
  const exact = w.plausible.get(name)
  if (exact !== undefined) return exact
  const lower = name.toLowerCase()
  const like = lower.includes('password') ? 'password' : lower.includes('email') ? 'email' : /user_?id$/.test(lower) ? 'user_id' : /sub_?role/.test(lower) ? 'sub_role_code' : null
  return (like !== null ? w.plausible.get(like) : undefined) ?? w.anyPlausible
}

/**
 * A value for one schema node: what the schema asks for, with values that
 * exist in the world (to get past validation and reach the commands), and
 * when `noisy`, sometimes junk instead.
 */
function valueFor(w: FuzzWorld, name: string, node: SchemaNode | undefined, noisy: boolean): fc.Arbitrary<unknown> {
  const types = node?.type === undefined ? [] : Array.isArray(node.type) ? node.type : [node.type]
  const choices: Array<fc.WeightedArbitrary<unknown>> = noisy ? [{ weight: 2, arbitrary: junkValue }] : []
  if (node?.const !== undefined) choices.push({ weight: 10, arbitrary: fc.constant(node.const) })
  else if (types.includes('object') && node?.properties !== undefined) choices.push({ weight: 10, arbitrary: objectFor(w, node, noisy) })
  else if (types.includes('array') && node?.items !== undefined) {
    const item = valueFor(w, name, node.items, noisy)
    choices.push({ weight: 8, arbitrary: fc.array(item, { minLength: 1, maxLength: 3 }) })
    // One past the usual upper bounds (100 checks per batch).
    if (noisy) choices.push({ weight: 1, arbitrary: item.map((v) => Array.from({ length: 101 }, () => v)) })
  } else if (types.includes('integer') || types.includes('number')) {
    choices.push({ weight: 8, arbitrary: fc.oneof(fc.integer({ min: -2, max: 200 }), fc.constantFrom(2 ** 53, 1e308, 0.5, -0)) })
  } else {
    choices.push({ weight: 10, arbitrary: plausibleFor(w, name) })
  }
  return fc.oneof(...choices)
}

/** An object of a schema's properties; when `noisy`, a required one may be missing and an odd key added. */
function objectFor(w: FuzzWorld, node: SchemaNode, noisy: boolean): fc.Arbitrary<Record<string, unknown>> {
  const properties = node.properties ?? {}
  const keys = Object.keys(properties)
  const required = (node.required ?? []).filter((k) => keys.includes(k))
  const fields = fc.record(Object.fromEntries(keys.map((k) => [k, valueFor(w, k, properties[k], noisy)])), { requiredKeys: required })
  const base = keys.includes('obj') && keys.includes('act') ? fc.tuple(fields, fc.option(w.pair, { freq: 4 })).map(([o, p]) => withPair(o, p)) : fields
  if (!noisy) return base
  const extra = fc.oneof(
    { weight: 6, arbitrary: fc.constant<Array<[string, unknown]>>([]) },
    { weight: 1, arbitrary: fc.array(fc.tuple(fc.oneof(fc.constantFrom(...ODD_KEYS), binaryString), junkValue), { minLength: 1, maxLength: 2 }) },
  )
  const drop = fc.option(fc.nat(), { freq: 6 })
  return fc.tuple(base, extra, drop).map(([object, extras, dropAt]) => {
    const result: Record<string, unknown> = { ...object }
    // Own properties defined outright, so a key such as "constructor" is data, not an accessor.
    for (const [k, v] of extras) Object.defineProperty(result, k, { value: v, enumerable: true, writable: true, configurable: true })
    if (dropAt !== null && keys.length > 0) delete result[keys[dropAt % keys.length] as string]
    return result
  })
}

/** Puts a catalog pair in place of the obj and act drawn on their own, when both are there. */
function withPair<T extends Record<string, unknown>>(fields: T, pair: { obj: string; act: string } | null): T {
  return pair !== null && 'obj' in fields && 'act' in fields ? { ...fields, obj: pair.obj, act: pair.act } : fields
}

/** `{` + `"__proto__":…,` put in right after an opening brace of the JSON text (the top object's or `data`'s). */
function injectAfterBrace(json: string, injection: string, intoData: boolean): string {
  const at = intoData ? json.indexOf('"data":{') + '"data":{'.length : json.startsWith('{') ? 1 : -1
  if (at <= 0) return json
  const rest = json.slice(at)
  return `${json.slice(0, at)}${injection}${rest.startsWith('}') ? '' : ','}${rest}`
}

interface BodyCase {
  kind: string
  payload: string | Buffer | undefined
  contentType: string | undefined
}

const HUGE_BODY = `{"command":"x","data":{"name":"${'x'.repeat(BODY_LIMIT + 16)}"}}`

function bodyFor(w: FuzzWorld, route: DeclaredRoute, noisy: boolean): fc.Arbitrary<BodyCase> {
  if (!noisy) {
    if (route.body === undefined) return fc.constant<BodyCase>({ kind: 'none', payload: undefined, contentType: undefined })
    return objectFor(w, route.body, false).map((value): BodyCase => ({ kind: 'valid-ish', payload: JSON.stringify(value), contentType: 'application/json' }))
  }
  const contentType = fc.oneof({ weight: 10, arbitrary: fc.constant<string | undefined>('application/json') }, { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) })
  const json = (kind: string, text: fc.Arbitrary<string>) =>
    fc.tuple(text, contentType).map(([payload, ct]): BodyCase => ({ kind, payload, contentType: ct }))
  const schemaShaped = route.body !== undefined ? objectFor(w, route.body, true) : fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' })
  const structured = fc
    .tuple(schemaShaped, fc.option(fc.constantFrom(...PROTO_INJECTIONS), { freq: 4 }), fc.boolean())
    .map(([value, injection, intoData]) => {
      const text = JSON.stringify(value) ?? 'null'
      return injection === null ? text : injectAfterBrace(text, injection, intoData)
    })
  const deep = fc.tuple(fc.constantFrom(100, 1000, 10_000, 100_000), fc.boolean()).map(([depth, arrays]) =>
    arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `{"command":"x","data":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`,
  )
  const broken = fc.constantFrom('', '{', '}', 'null', '[]', '""', '{"command":', "{'a':1}", '{"a":1,}', '\u0000', '\ufeff{}', '{"command":"x"}garbage', 'NaN', '1e999', '{"a":"\\ud800"}', '{"a":"\\u0000"}')
  const bytes = fc.constantFrom(
    Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
    Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
    Buffer.from([0xfe, 0xff, 0x00, 0x7b, 0x00, 0x7d]),
    Buffer.from('{"command":"x","data":{"name":"\xed\xa0\x80"}}', 'latin1'),
  )
  return fc.oneof(
    { weight: 12, arbitrary: json('schema-shaped', structured) },
    { weight: 2, arbitrary: json('any JSON', fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }).map((v) => JSON.stringify(v) ?? 'null')) },
    { weight: 2, arbitrary: json('broken JSON', broken) },
    { weight: 1, arbitrary: json('deep nesting', deep) },
    { weight: 1, arbitrary: json('over the body limit', fc.constant(HUGE_BODY)) },
    { weight: 1, arbitrary: fc.tuple(bytes, contentType).map(([payload, ct]): BodyCase => ({ kind: 'bad bytes', payload, contentType: ct })) },
    { weight: 2, arbitrary: fc.constant<BodyCase>({ kind: 'none', payload: undefined, contentType: undefined }) },
  )
}

function queryValue(w: FuzzWorld, name: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 10, arbitrary: plausibleFor(w, name).map(pct) },
    { weight: 2, arbitrary: oddString.map(pct) },
    { weight: 2, arbitrary: fc.constantFrom(...RAW_ESCAPES) },
    { weight: 1, arbitrary: binaryString.map(pct) },
    { weight: 1, arbitrary: fc.constant('x'.repeat(10_000)) },
  )
}

function queryFor(w: FuzzWorld, route: DeclaredRoute, noisy: boolean): fc.Arbitrary<string> {
  const keys = Object.keys(route.querystring?.properties ?? {})
  const required = (route.querystring?.required ?? []).filter((k) => keys.includes(k))
  const value = (k: string) => (noisy ? queryValue(w, k) : plausibleFor(w, k).map(pct))
  const fields = fc.record(Object.fromEntries(keys.map((k) => [k, value(k)])), { requiredKeys: noisy ? [] : required })
  const base = keys.includes('obj') && keys.includes('act')
    ? fc.tuple(fields, fc.option(w.pair.map((p) => ({ obj: pct(p.obj), act: pct(p.act) })), { freq: 4 })).map(([o, p]) => withPair(o, p))
    : fields
  const join = (known: Record<string, string>, more: Array<[string, string]>, tail: string) =>
    [...Object.entries(known).map(([k, v]) => `${k}=${v}`), ...more.map(([k, v]) => `${k}=${v}`), tail].filter((p) => p !== '').join('&')
  if (!noisy) return base.map((known) => join(known, [], ''))
  // Routes without a query schema still get the odd keys, and `lang` as a key they do not expect.
  const named = keys.length > 0 ? keys : ['lang']
  const oddKey = fc.oneof(
    fc.constantFrom(...named, '__proto__', 'constructor', '__proto__[polluted]', 'constructor[prototype][polluted]', 'a[]', '%00', '%ZZ', ''),
    fc.constantFrom(...named).map((k) => `${k}[]`),
    fc.constantFrom(...named).map((k) => `${k}[0]`),
    binaryString.map(pct),
  )
  const extras = fc.array(fc.tuple(oddKey, queryValue(w, 'any')), { maxLength: 3 })
  const junk = fc.constantFrom('', '', '', '&', '&&', '=', '=x', 'x', '&=&', '%', '%zz', '?', '[]=1', 'a[b][c]=1')
  return fc.tuple(base, extras, junk).map(([known, more, tail]) => join(known, more, tail))
}

function pathFor(w: FuzzWorld, route: DeclaredRoute, noisy: boolean): fc.Arbitrary<string> {
  const segments = route.url.split('/')
  return fc.tuple(
    ...segments.map((segment) => {
      if (!segment.startsWith(':')) return fc.constant(segment)
      const name = segment.slice(1)
      if (!noisy) return plausibleFor(w, name).map(pct)
      return fc.oneof(
        { weight: 10, arbitrary: plausibleFor(w, name).map(pct) },
        { weight: 2, arbitrary: oddString.map(pct) },
        { weight: 2, arbitrary: fc.constantFrom(...RAW_ESCAPES) },
        { weight: 1, arbitrary: binaryString.map(pct) },
        { weight: 1, arbitrary: fc.constantFrom('', 'a'.repeat(101), 'a'.repeat(5000)) },
      )
    }),
  ).map((parts) => parts.join('/'))
}

interface FuzzCase {
  method: string
  path: string
  query: string
  body: BodyCase
  credential: Credential
  headers: Record<string, string>
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Two kinds of case: well-formed requests from valid callers with values
 * from the world (they reach the commands, and the root callers' succeed and
 * change the world), and noisy ones, where any part may be broken.
 */
function caseFor(w: FuzzWorld, route: DeclaredRoute): fc.Arbitrary<FuzzCase> {
  return fc.oneof({ weight: 2, arbitrary: caseOfKind(w, route, false) }, { weight: 3, arbitrary: caseOfKind(w, route, true) })
}

function caseOfKind(w: FuzzWorld, route: DeclaredRoute, noisy: boolean): fc.Arbitrary<FuzzCase> {
  const valid = w.credentials.filter((c) => c.valid)
  const headers = fc.record(
    {
      'accept-language': fc.oneof(fc.constantFrom('es', 'en', 'es-MX,fr;q=0.5', '*', 'xx', ';q=', 'es;q=abc'), headerText),
      'x-request-id': headerText,
      'x-forwarded-for': fc.oneof(fc.constantFrom('1.2.3.4', '::1', 'unknown, 10.0.0.1', '999.1.1.1'), headerText),
      'x-authz-obj': fc.oneof(plausibleFor(w, 'obj'), headerText),
      'x-authz-act': fc.oneof(plausibleFor(w, 'act'), headerText),
      'x-authz-domain': fc.oneof(plausibleFor(w, 'domain'), headerText),
      'x-original-method': fc.oneof(fc.constantFrom(...METHODS), headerText),
      'x-original-uri': fc.oneof(fc.constantFrom('/orders/1', '/a/../admin', '//x', '/%2e%2e/admin'), headerText),
    },
    { requiredKeys: [] },
  )
  return fc.record({
    method: noisy ? fc.oneof({ weight: 14, arbitrary: fc.constant(route.method) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) }) : fc.constant(route.method),
    path: pathFor(w, route, noisy),
    query: queryFor(w, route, noisy),
    body: bodyFor(w, route, noisy),
    credential: noisy ? fc.oneof({ weight: 1, arbitrary: fc.constantFrom(...valid) }, { weight: 1, arbitrary: fc.constantFrom(...w.credentials) }) : fc.constantFrom(...valid),
    headers: noisy
      ? headers.map((h) => Object.fromEntries(Object.entries(h).filter((e): e is [string, string] => typeof e[1] === 'string')))
      : fc.constant<Record<string, string>>({}),
  })
}

// ---------------------------------------------------------------- the checks

const clip = (text: string, length = 300): string => (text.length > length ? `${text.slice(0, length)}…(${text.length} chars)` : text)

function describe(c: FuzzCase, url: string, res?: LightMyRequestResponse): string {
  const payload = c.body.payload === undefined ? '(none)' : typeof c.body.payload === 'string' ? JSON.stringify(clip(c.body.payload)) : `bytes ${c.body.payload.toString('hex')}`
  return [
    `${c.method} ${clip(url)}`,
    `token: ${c.credential.label}; content-type: ${String(c.body.contentType)}; body (${c.body.kind}): ${payload}`,
    `headers: ${JSON.stringify(c.headers)}`,
    ...(res !== undefined ? [`answer: ${res.statusCode} ${clip(res.body, 500)}`] : []),
  ].join('\n  ')
}

const LOGOUT = '/v2/auth/logout'

/** A fresh token of the account a valid `Bearer` header names, under its credentials as they are now. */
function freshBearer(ta: TestApp, header: string | undefined): string {
  const account = ta.service.accounts.peek(String(decodePayload((header ?? '').slice('Bearer '.length)).sub))
  if (account === undefined) throw new Error('a valid caller names a known account')
  return `Bearer ${ta.tokenFor(account)}`
}

const prototypeKeys = (): string => Object.getOwnPropertyNames(Object.prototype).sort().join(',')

interface RouteTally {
  route: string
  cases: number
  succeeded: number
  statuses: Map<number, number>
}

t.test(`fuzzing every declared route (${backend})`, async (t) => {
  const ta = await buildTestApp(t, { service: await buildTestService(t, { env: { MIN_REVISION_WAIT_MS: '0' }, passwords: cheapPasswords() }) })
  const w = await buildWorld(ta)
  const routes = apiRoutes(await declaredRoutes(ta.service))
  t.ok(routes.length >= 17, `${routes.length} routes declared`)
  const db = ta.service.db
  const cleanPrototype = prototypeKeys()
  let current = await fingerprint(db)
  const tallies: RouteTally[] = []
  const lockedOut = new Set<string>()
  const started = Date.now()

  for (const [i, route] of routes.entries()) {
    const tally: RouteTally = { route: `${route.method} ${route.url}`, cases: 0, succeeded: 0, statuses: new Map() }
    tallies.push(tally)
    // What is left of the budget, shared among the routes still to go.
    const timeLimit = Math.max(500, (FUZZ_BUDGET_MS - (Date.now() - started)) / (routes.length - i))
    let failure: string | null = null
    const property = fc.asyncProperty(caseFor(w, route), async (c) => {
      const url = c.query === '' ? c.path : `${c.path}?${c.query}`
      const sent = [url, decodedOrRaw(url), typeof c.body.payload === 'string' ? c.body.payload : '', ...Object.values(c.headers)].join('\n')
      // An answer may name the field or path it refuses: a request that itself looks like internals proves nothing.
      fc.pre(!INTERNALS.test(sent))
      // A logout ends the token it is sent with (or all of the account's): each case sends a token of its own.
      const authorization = route.url === LOGOUT && c.credential.valid ? freshBearer(ta, c.credential.header) : c.credential.header
      const send = (method: string) =>
        ta.app.inject({
        method: method as 'GET',
        url,
        headers: {
          ...c.headers,
          ...(authorization !== undefined ? { authorization } : {}),
          ...(c.body.contentType !== undefined ? { 'content-type': c.body.contentType } : {}),
        },
        ...(c.body.payload !== undefined ? { payload: c.body.payload } : {}),
      })
      const res = await send(c.method)
      tally.cases++
      tally.statuses.set(res.statusCode, (tally.statuses.get(res.statusCode) ?? 0) + 1)
      const ok = res.statusCode >= 200 && res.statusCode < 300
      if (ok) tally.succeeded++
      const problems: string[] = []
      const hasBody = c.method !== 'HEAD' && res.statusCode !== 204
      const codeOf = (answer: LightMyRequestResponse): unknown =>
        /^application\/json/.test(String(answer.headers['content-type'])) ? (JSON.parse(answer.body) as { response_code?: unknown }).response_code : undefined
      // A HEAD answer has no body to say why it failed: the same request as a GET does.
      const code = hasBody ? codeOf(res) : res.statusCode >= 500 && c.method === 'HEAD' ? codeOf(await send('GET')) : undefined
      if (res.statusCode >= 500 && !(res.statusCode === 503 && code === '902')) problems.push(`status ${res.statusCode}`)
      if (!ok && hasBody) problems.push(...errorShapeProblems(res))
      // Successes in JSON are the envelope; an operational endpoint may answer in its own format (Prometheus text).
      const json = /^application\/json/.test(String(res.headers['content-type']))
      if (ok && hasBody && json && code !== '001') problems.push('a success without response_code 001')
      if (INTERNALS.test(res.body) || Object.values(res.headers).some((v) => INTERNALS.test(String(v)))) problems.push('internals in the answer')
      const after = await fingerprint(db)
      const changed = changedTables(current, after)
      current = after
      if (!ok && changed.length > 0) problems.push(`a refused request changed ${changed.join(', ')}`)
      if (prototypeKeys() !== cleanPrototype || ({} as Record<string, unknown>).polluted !== undefined) problems.push('Object.prototype was changed')
      if (problems.length > 0) {
        failure = `${[...new Set(problems)].join('; ')}\n  ${describe(c, url, res)}`
        throw new Error(failure)
      }
    })
    try {
      await fc.assert(property, { seed: SEED + i, numRuns: RUNS_PER_ROUTE, interruptAfterTimeLimit: timeLimit, endOnFailure: true })
      t.pass(`${tally.route}: ${tally.cases} cases`)
    } catch (error) {
      // fast-check's own report repeats the whole case unclipped: ours says the same in a readable size.
      const replay = /\{ seed: [^}]*\}/.exec((error as Error).message)?.[0] ?? ''
      t.fail(`${tally.route}: ${failure ?? (error as Error).message.slice(0, 2000)}\n  replay: ${replay}`)
    }
    // A logout everywhere ended the callers' own tokens too: later routes are fuzzed with fresh ones.
    if (route.url === LOGOUT) for (const credential of w.credentials.filter((c) => c.valid)) credential.header = freshBearer(ta, credential.header)
    // Later routes are fuzzed with the same callers: say so if one of them no longer gets in.
    for (const credential of w.credentials.filter((c) => c.valid && !lockedOut.has(c.label))) {
      const res = await ta.app.inject({ method: 'GET', url: '/v2/profile', headers: { authorization: credential.header ?? '' } })
      if (res.statusCode !== 200) {
        lockedOut.add(credential.label)
        t.comment(`after ${tally.route}, the ${credential.label} caller gets ${res.statusCode} ${res.body}`)
      }
    }
  }

  const total = tallies.reduce((sum, r) => sum + r.cases, 0)
  for (const r of tallies) {
    const statuses = [...r.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')
    t.comment(`${r.route}: ${r.cases} cases (${r.succeeded} succeeded; ${statuses})`)
  }
  t.comment(`fuzz cases run: ${total} over ${routes.length} routes in ${((Date.now() - started) / 1000).toFixed(1)} s (${backend}, seed ${SEED})`)
  t.ok(tallies.every((r) => r.cases > 0), 'every route was fuzzed at least once')

  const audit = await verifyAudit(db)
  t.equal(audit.problem, null, `the audit chain verifies (${audit.rows} rows)`)

  // Whatever the fuzz wrote, memory must decide as the database says.
  const fresh = await buildTestService(t, { db })
  const ids = (await db.query<{ id: string }>('SELECT id::text AS id FROM admin_accounts')).rows.map((r) => r.id)
  const domains = ['global', ...(await db.query<{ id: string }>('SELECT id FROM merchants')).rows.map((r) => r.id)]
  const pairs = ta.service.engine.catalogEntries()
  let compared = 0
  const mismatches: string[] = []
  for (const id of ids) {
    const mine = await ta.service.accounts.get(id)
    const theirs = await fresh.accounts.get(id)
    if (mine === null || theirs === null) {
      mismatches.push(`account ${id} missing from memory`)
      continue
    }
    for (const domain of domains) {
      for (const p of pairs) {
        compared++
        if (ta.service.engine.decide(mine, domain, p.obj, p.act) !== fresh.engine.decide(theirs, domain, p.obj, p.act)) {
          mismatches.push(`${mine.email} ${domain} ${p.obj}:${p.act}`)
        }
      }
    }
  }
  t.same(mismatches.slice(0, 20), [], `memory decides as a fresh load (${compared} decisions)`)
})
