import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchema } from 'fastify'
import type { FieldError } from '../domain/errors.js'
import { DeferredCompiles } from './deferredCompile.js'
import type { Translate } from '../i18n/index.js'

type AddFormats = (ajv: Ajv) => Ajv
// ajv-formats is CommonJS with a default export; under NodeNext its namespace holds the function.
const formatsModule = addFormatsModule as unknown as AddFormats | { default: AddFormats }
const addFormats: AddFormats = typeof formatsModule === 'function' ? formatsModule : formatsModule.default

/** An answer lists at most this many field errors. */
export const MAX_FIELD_ERRORS = 10

/** Ajv's wrappers around the errors of a union's members: the members' own errors say more. */
const WRAPPERS = new Set(['anyOf', 'oneOf', 'if'])

/**
 * The errors an answer is built from: a `command` that does not match the
 * endpoint (its own answer, wherever Ajv found it), then the first
 * MAX_FIELD_ERRORS others. What Fastify and the error mapper walk after
 * this is bounded, however many errors Ajv gathered.
 */
function firstErrors(errors: readonly ErrorObject[]): ErrorObject[] {
  const kept: ErrorObject[] = []
  let fields = 0
  for (const error of errors) {
    if (error.keyword === 'const' && error.instancePath === '/command') kept.unshift(error)
    else if (fields < MAX_FIELD_ERRORS) {
      kept.push(error)
      if (!WRAPPERS.has(error.keyword)) fields++
    }
  }
  return kept
}

/**
 * Gives each route a validator that Ajv compiles when it first validates
 * something or when compileDeferred() reaches it, whichever comes first
 * (deferredCompile.ts says why). Its
 * `errors` are firstErrors() of Ajv's; Fastify reads `schemaEnv` (so that
 * defaults reach the root), which compiles it too.
 */
export interface ValidatorCompiler {
  (route: { schema: FastifySchema; httpPart?: string }): ValidateFunction
  /** Compiles the validators not compiled yet, one per turn of the event loop: a request arriving meanwhile waits for one at most. */
  compileDeferred(): Promise<void>
}

/**
 * Bodies are validated strictly (no type coercion: `"email": 123` is an
 * error, not "123"); query strings and path parameters arrive as text, so
 * there numbers and booleans are coerced. Ajv gathers every error (a form
 * shows them all at once); what it walks is bounded before it runs: a body
 * by JSON_BODY_BOUNDS (jsonBody.ts), a query string by the 16 KB of headers
 * Node's parser accepts.
 */
export function createValidatorCompiler(): ValidatorCompiler {
  const options = { allErrors: true, useDefaults: true, removeAdditional: false, strict: false } as const
  const strict = new Ajv({ ...options, coerceTypes: false })
  const coercing = new Ajv({ ...options, coerceTypes: true })
  addFormats(strict)
  addFormats(coercing)
  const deferred = new DeferredCompiles()
  const compiler = ({ schema, httpPart }: { schema: FastifySchema; httpPart?: string }): ValidateFunction => {
    const compiled = deferred.defer(() => (httpPart === 'body' ? strict : coercing).compile(schema as object))
    const check = ((data: unknown, context?: Parameters<ValidateFunction>[1]) => {
      const run = compiled()
      const valid = run(data, context)
      check.errors = valid ? null : firstErrors(run.errors ?? [])
      return valid
    }) as ValidateFunction
    check.errors = null
    Object.defineProperty(check, 'schemaEnv', { get: () => compiled().schemaEnv })
    Object.defineProperty(check, 'schema', { get: () => compiled().schema })
    return check
  }
  return Object.assign(compiler, { compileDeferred: () => deferred.drain() })
}

/** The field an AJV error is about, named as the client sent it (`email`, `checks[0].obj`, `page`). */
function fieldOf(error: ErrorObject): string {
  const segments = error.instancePath.split('/').filter((s) => s !== '')
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty))
  if (error.keyword === 'additionalProperties') segments.push(String(error.params.additionalProperty))
  if (segments[0] === 'data' && segments.length > 1) segments.shift()
  return segments.reduce((path, s) => (/^\d+$/.test(s) ? `${path}[${s}]` : path === '' ? s : `${path}.${s}`), '')
}

function messageOf(error: ErrorObject, t: Translate): string {
  const p = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'format':
      return p.format === 'email' ? t('validation.format_email') : t('validation.format', { format: p.format })
    case 'type':
      return t('validation.type', { type: p.type })
    case 'minLength':
    case 'maxLength':
    case 'minimum':
    case 'maximum':
    case 'minItems':
    case 'maxItems':
      // `count` picks the plural form ("at least 1 character", "al menos 1 carácter").
      return t(`validation.${error.keyword}`, { limit: p.limit, count: Number(p.limit) })
    case 'enum':
      return t('validation.enum', { allowed: (p.allowedValues as unknown[]).join(', ') })
    case 'const':
      return t('validation.const', { allowed: String(p.allowedValue) })
    case 'required':
    case 'pattern':
    case 'additionalProperties':
      return t(`validation.${error.keyword}`)
    default:
      return t('validation.invalid')
  }
}

/** At most MAX_FIELD_ERRORS localised field errors; `anyOf`/`union` wrappers are dropped in favour of the errors they wrap. */
export function localiseValidation(errors: readonly ErrorObject[], t: Translate): FieldError[] {
  const seen = new Set<string>()
  const result: FieldError[] = []
  for (const error of errors) {
    if (result.length === MAX_FIELD_ERRORS) break
    if (WRAPPERS.has(error.keyword)) continue
    const field = fieldOf(error) || 'body'
    const message = messageOf(error, t)
    const key = `${field}\u0000${message}`
    if (seen.has(key)) continue
    seen.add(key)
    result.push({ field, message })
  }
  return result
}
