import { execFile } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import swagger from '@fastify/swagger'
import Fastify from 'fastify'
import openapiTS, { astToString } from 'openapi-typescript'
import t from 'tap'
import ts from 'typescript'
import { errorTable } from '../../src/domain/errors.js'
import { componentRef, operationsOf, routePath, type OpenapiDocument, type OperationObject } from '../../src/http/openapi/document.js'
import { renderErrorReference } from '../../src/http/openapi/errorReference.js'
import { GENERATED_FILES, generateFiles } from '../../src/http/openapi/generate.js'
import { swaggerOptions } from '../../src/http/openapi/index.js'
import { OPERATIONS } from '../../src/http/openapi/operations.js'
import { buildTestApp, onboard, register, tempDir } from '../helper.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('the OpenAPI document')

/**
 * The OpenAPI document tells the truth: openapi.json, docs/api.md and
 * docs/errors.md are what the app and the error table build, Redocly's recommended rules pass, every operation is
 * named and described with the codes it answers, and generated TypeScript
 * types are real enough to catch a typo.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const REGENERATE = 'run `npm run openapi` and commit openapi.json, docs/api.md and docs/errors.md'
const ENTRY_HINT = 'add an entry to OPERATIONS in src/http/openapi/operations.ts (operationId, summary, returns, data, errors), then run `npm run openapi`'

const execFileAsync = promisify(execFile)

/** `GET /v2/admin/accounts/:userId`, the key of an operation's entry. */
const entryKey = (method: string, path: string): string => `${method.toUpperCase()} ${routePath(path)}`

/** The first line where two texts differ, to say where a stale file went wrong. */
function firstDifference(expected: string, actual: string): string {
  const a = expected.split('\n')
  const b = actual.split('\n')
  const line = a.findIndex((text, i) => text !== b[i])
  const at = line === -1 ? a.length : line
  return `line ${at + 1}: expected ${JSON.stringify(a[at] ?? '<end>')}, found ${JSON.stringify(b[at] ?? '<end>')}`
}

/** Everything wrong with how a document names and describes its operations; empty when all is well. */
function operationProblems(doc: OpenapiDocument): string[] {
  const problems: string[] = []
  const ids = new Map<string, string>()
  for (const { method, path, operation } of operationsOf(doc)) {
    const key = entryKey(method, path)
    const entry = OPERATIONS[key]
    if (entry === undefined) {
      problems.push(`${key} has no entry: ${ENTRY_HINT}`)
      continue
    }
    const id = operation.operationId ?? ''
    if (id !== entry.operationId) problems.push(`${key}: operationId is ${JSON.stringify(id)}, its entry says ${entry.operationId}`)
    if (!/^[a-z]+(-[a-z]+)*$/.test(id)) problems.push(`${key}: operationId ${JSON.stringify(id)} is not kebab-case`)
    if (ids.has(id)) problems.push(`${key}: operationId ${id} is also ${ids.get(id)}'s`)
    ids.set(id, key)
    const summary = operation.summary ?? ''
    if (!/^[A-Z].{9,99}[.?]$/.test(summary)) problems.push(`${key}: the summary ${JSON.stringify(summary)} is not one short sentence`)
    problems.push(...responseProblems(key, operation))
  }
  return problems
}

function responseProblems(key: string, operation: OperationObject): string[] {
  const problems: string[] = []
  const statuses = Object.keys(operation.responses)
  if (!statuses.some((s) => s.startsWith('2'))) problems.push(`${key}: no success response`)
  for (const [status, response] of Object.entries(operation.responses)) {
    const where = `${key} ${status}`
    if (response.description === '' || /default response/i.test(response.description)) problems.push(`${where}: no real description`)
    const codes = response['x-response-codes']
    if (response.content === undefined) {
      if (!status.startsWith('2')) problems.push(`${where}: an error without the error envelope`)
      continue
    }
    // A success that is a file rather than an envelope (the policy's CSV) carries no response_code.
    if (status.startsWith('2') && response.content['application/json'] === undefined) continue
    if (codes === undefined || codes.length === 0) {
      problems.push(`${where}: lists no response_code`)
      continue
    }
    for (const code of codes) {
      if (!response.description.includes(`\`${code}\``)) problems.push(`${where}: the description does not name ${code}`)
      const known = code === '001' ? ['200', '201'] : Object.values(errorTable).filter((e) => e.responseCode === code).map((e) => String(e.status))
      if (!known.includes(status)) problems.push(`${where}: ${code} is never answered with ${status}`)
    }
    const schema = response.content['application/json']?.schema
    if (status.startsWith('2')) {
      const data = (schema?.properties as { data?: { $ref?: string } } | undefined)?.data
      if (typeof data?.$ref !== 'string') problems.push(`${where}: data is not a named schema: give its entry \`data\``)
    } else if (schema?.$ref !== componentRef('ErrorEnvelope')) {
      problems.push(`${where}: not the error envelope`)
    }
  }
  const body = operation.requestBody?.content['application/json']?.schema
  if (body !== undefined && typeof body.$ref !== 'string') problems.push(`${key}: the request body is not a named schema`)
  return problems
}

/** Every `$ref` in a value. */
function refsIn(value: unknown, found = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) refsIn(v, found)
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') found.add(v)
      else refsIn(v, found)
    }
  }
  return found
}

t.test('the OpenAPI document', async (t) => {
  // Read-your-writes probes below must not wait.
  const ta = await buildTestApp(t, { env: { MIN_REVISION_WAIT_MS: '0' } })
  const files = await generateFiles(ta.service)
  const doc = JSON.parse(files['openapi.json']) as OpenapiDocument
  const dir = tempDir(t, 'aps-openapi-')
  const generated = join(dir, 'openapi.json')
  await writeFile(generated, files['openapi.json'])

  t.test('openapi.json, docs/api.md and docs/errors.md are the ones the app builds', async (t) => {
    for (const name of GENERATED_FILES) {
      const committed = await readFile(join(ROOT, name), 'utf8').catch(() => null)
      if (committed === null) t.fail(`${name} is missing: ${REGENERATE}`)
      else t.ok(committed === files[name], committed === files[name] ? `${name} is up to date` : `${name} is stale (${firstDifference(files[name], committed)}): ${REGENERATE}`)
    }
    t.ok(files['openapi.json'].endsWith('}\n') && files['openapi.json'].startsWith('{\n  "openapi"'), 'two-space JSON with a final newline')
    t.notMatch(files['openapi.json'], /\/(?:home|root|tmp|Users)\/|127\.0\.0\.1|localhost:\d/, 'nothing of the machine it was made on')
  })

  t.test('docs/errors.md is the error table: a row per error, and a change to the table is a change to the page', async (t) => {
    const page = files['docs/errors.md']
    for (const [code, entry] of Object.entries(errorTable)) {
      t.match(page, `| \`${entry.responseCode}\` | ${entry.status}`, `${code} has its row`)
      t.ok(page.includes(`| \`${code}\` | ${entry.meaning} |`), `${code}'s meaning is the table's`)
    }
    const english = { ...Object.fromEntries(Object.keys(errorTable).map((code) => [code, 'text'])), ZZ_NEW: 'A new error.' }
    const grown = renderErrorReference(english, { ...errorTable, ZZ_NEW: { status: 418, responseCode: '999', meaning: 'a new meaning' } })
    t.match(grown, '| `999` | 418 | `ZZ_NEW` | a new meaning | A new error. |', 'a new entry makes a new row')
    t.not(grown, page, 'so the committed page would be stale')
  })

  t.test("Redocly's recommended rules find no error", async (t) => {
    const bin = join(ROOT, 'node_modules', '.bin', process.platform === 'win32' ? 'redocly.cmd' : 'redocly')
    // Run in the temporary folder, so that no configuration file of the checkout changes the rules.
    const run = await execFileAsync(bin, ['lint', generated, '--extends', 'recommended', '--format', 'json'], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      maxBuffer: 16 * 1024 * 1024,
    }).catch((error: { stdout?: string; stderr?: string }) => ({ stdout: error.stdout ?? '', stderr: error.stderr ?? '' }))
    const report = JSON.parse(run.stdout) as {
      totals: { errors: number; warnings: number }
      problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>
    }
    const describe = (p: (typeof report.problems)[number]) => `${p.ruleId} at ${p.location[0]?.pointer ?? '?'}: ${p.message}`
    for (const warning of report.problems.filter((p) => p.severity === 'warn')) t.comment(`warning: ${describe(warning)}`)
    t.same(report.problems.filter((p) => p.severity === 'error').map(describe), [], 'no errors')
    t.equal(report.totals.errors, 0)
  })

  t.test('every operation is named, summed up and described with the codes it answers', async (t) => {
    t.same(operationProblems(doc), [], 'no problems')
    const documented = new Set(operationsOf(doc).map(({ method, path }) => entryKey(method, path)))
    const unused = Object.keys(OPERATIONS).filter((key) => !documented.has(key))
    t.same(unused, [], 'every entry of OPERATIONS is a documented route (remove the entries of routes that are gone or hidden)')
    t.ok(operationsOf(doc).length >= 25, `${operationsOf(doc).length} operations`)
  })

  t.test('a route without an entry is caught', async (t) => {
    const bare = Fastify()
    t.teardown(() => bare.close())
    await bare.register(swagger, swaggerOptions())
    bare.get('/v2/undocumented', { schema: { summary: 'undocumented', response: { 200: { type: 'object' } } } }, async () => ({}))
    await bare.ready()
    const problems = operationProblems(bare.swagger() as unknown as OpenapiDocument)
    t.same(problems, [`GET /v2/undocumented has no entry: ${ENTRY_HINT}`])
  })

  t.test('public routes need no token, hidden routes stay hidden, the server is relative', async (t) => {
    for (const { method, path, operation } of operationsOf(doc)) {
      const isPublic = ['/healthz', '/readyz', '/v2/auth/login'].includes(path)
      t.same(operation.security, isPublic ? [] : [{ bearerAuth: [] }], `${entryKey(method, path)}: ${isPublic ? 'security: []' : 'bearerAuth'}`)
    }
    for (const hidden of ['/metrics', '/v2/authz/verify/*', '/v2/authz/verify/{*}', '/docs', '/docs/json']) t.notOk(hidden in doc.paths, `${hidden} is not in the document`)
    t.same(doc.servers, [{ url: '/', description: 'The server this document is served from' }])
  })

  t.test('components name the bodies and data shapes, and every one is used', async (t) => {
    const names = Object.keys(doc.components.schemas)
    for (const name of ['ErrorEnvelope', 'FieldError', 'Account', 'PermissionPair', 'UserPermissionChange', 'GrantUserPermissionCommand', 'AccountPage', 'AccessToken']) {
      t.ok(names.includes(name), `${name} is a named schema`)
    }
    const used = refsIn({ paths: doc.paths, components: doc.components })
    t.same(
      names.filter((name) => !used.has(componentRef(name))),
      [],
      'no named schema is left unused (a shape no route has any more: take it out of SHARED_SCHEMAS in src/http/openapi/components.ts)',
    )
    t.same([...used].filter((ref) => !names.includes(ref.replace('#/components/schemas/', ''))), [], 'every reference resolves')
  })

  t.test('what the app answers is documented', async (t) => {
    const owner = await onboard(ta, 'm-openapi')
    const clerk = await register(ta, { email: 'clerk@m-openapi.example', sub_role_code: 'clerk' }, ta.tokenFor(owner))
    const clerkToken = ta.tokenFor(clerk)
    let probes = 0
    for (const { method, path, operation } of operationsOf(doc)) {
      const key = entryKey(method, path)
      const url = path.replace('{userId}', ta.root.id).replace('{subRoleCode}', 'clerk')
      const verb = method.toUpperCase() as 'GET' | 'POST' | 'DELETE'
      const answers = [
        ['no token', await ta.call({ method: verb, url, token: null })],
        ['a malformed token', await ta.call({ method: verb, url, token: 'not-a-token' })],
        // A merchant user holding nothing: refused by the guard, or answered about itself.
        ['a clerk without permissions', await ta.call({ method: verb, url, token: clerkToken })],
      ] as const
      const more =
        verb === 'GET'
          ? path.startsWith('/v2/')
            ? [['a min_revision not reached', await ta.call({ method: verb, url: `${url}?min_revision=999999999999` })] as const]
            : []
          : [
              ['a text body', await ta.call({ method: verb, url, body: 'text', headers: { 'content-type': 'text/plain' } })] as const,
              ['malformed JSON', await ta.call({ method: verb, url, body: '{"command":' })] as const,
              ['another command', await ta.call({ method: verb, url, body: { command: 'not-this-one', data: {} } })] as const,
            ]
      for (const [probe, res] of [...answers, ...more]) {
        probes += 1
        const response = operation.responses[String(res.statusCode)]
        const code = res.body === '' ? undefined : (res.json() as { response_code?: string }).response_code
        const listed = response !== undefined && (code === undefined || (response['x-response-codes'] ?? []).includes(code))
        t.ok(listed, `${key} with ${probe} answers ${res.statusCode} ${code ?? '(no body)'}${listed ? '' : ': document it in src/http/openapi/'}`)
      }
    }
    t.ok(probes > 100, `${probes} answers compared with the document`)
  })

  t.test('generated TypeScript types are real', async (t) => {
    const types = astToString(await openapiTS(pathToFileURL(generated)))
    await writeFile(join(dir, 'api.ts'), types)
    const client = join(dir, 'client.ts')
    await writeFile(
      client,
      `import type { components, paths } from './api.js'

type GrantUser = paths['/v2/admin/permissions/users/{userId}/grant']['post']
type GrantBody = GrantUser['requestBody']['content']['application/json']
type GrantAnswer = GrantUser['responses'][200]['content']['application/json']
type Refusal = GrantUser['responses'][403]['content']['application/json']

/** How the client sends a request; a test needs no network. */
declare function post(url: string, token: string, body: unknown): Promise<unknown>

export async function grantUserPermission(token: string, userId: GrantUser['parameters']['path']['userId'], data: GrantBody['data']): Promise<GrantAnswer> {
  const body: GrantBody = { command: 'grant-user-permission', data }
  return (await post(\`/v2/admin/permissions/users/\${userId}/grant\`, token, body)) as GrantAnswer
}

export async function allowRefunds(token: string, userId: string): Promise<'allow' | 'deny' | null> {
  const answer = await grantUserPermission(token, userId, { obj: 'orders', act: 'refund', domain: 'm-1001' })
  const success: '001' = answer.response_code
  const revision: number = answer.data.revision
  void success
  void revision
  return answer.data.effect
}

export function refusalCode(refusal: Refusal): string {
  const fields: string[] = (refusal.errors ?? []).map((e: components['schemas']['FieldError']) => e.field)
  return \`\${refusal.response_code} \${fields.join(',')}\`
}

// @ts-expect-error: a typo in a field of the command's data is caught
export const typo: GrantBody = { command: 'grant-user-permission', data: { obj: 'orders', act: 'refund', domian: 'm-1001' } }
// @ts-expect-error: the command must be this operation's own
export const otherCommand: GrantBody = { command: 'deny-user-permission', data: { obj: 'orders', act: 'refund' } }
// @ts-expect-error: an answer's data has no such field
export const missing = (answer: GrantAnswer): string => answer.data.user
`,
    )
    const program = ts.createProgram([client], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts'],
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      types: [],
    })
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file !== undefined && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined
      return `${d.file?.fileName.slice(dir.length + 1) ?? ''}:${where === undefined ? '' : where.line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
    })
    t.same(diagnostics, [], 'the typed client compiles, and each deliberate mistake is an error')
    t.match(types, /"grant-user-permission"/, 'the command is a literal type')
  })
})
