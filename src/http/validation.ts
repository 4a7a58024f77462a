import { Ajv, type ErrorObject } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { FastifySchema } from 'fastify'
import type { FieldError } from '../domain/errors.js'
import type { Translate } from './i18n/index.js'

type AddFormats = (ajv: Ajv) => Ajv
// ajv-formats is CommonJS with a default export; under NodeNext its namespace holds the function.
const formatsModule = addFormatsModule as unknown as AddFormats | { default: AddFormats }
const addFormats: AddFormats = typeof formatsModule === 'function' ? formatsModule : formatsModule.default

/**
 * Bodies are validated strictly (no type coercion: `"email": 123` is an
 * error, not "123"); query strings and path parameters arrive as text, so
 * there numbers and booleans are coerced.
 */
export function createValidatorCompiler() {
  const options = { allErrors: true, useDefaults: true, removeAdditional: false, strict: false } as const
  const strict = new Ajv({ ...options, coerceTypes: false })
  const coercing = new Ajv({ ...options, coerceTypes: true })
  addFormats(strict)
  addFormats(coercing)
  return ({ schema, httpPart }: { schema: FastifySchema; httpPart?: string }) =>
    (httpPart === 'body' ? strict : coercing).compile(schema as object)
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
      return t(`validation.${error.keyword}`, { limit: p.limit })
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

/** Localised field errors; `anyOf`/`union` wrappers are dropped in favour of the errors they wrap. */
export function localiseValidation(errors: readonly ErrorObject[], t: Translate): FieldError[] {
  const seen = new Set<string>()
  const result: FieldError[] = []
  for (const error of errors) {
    if (error.keyword === 'anyOf' || error.keyword === 'oneOf' || error.keyword === 'if') continue
    const field = fieldOf(error) || 'body'
    const message = messageOf(error, t)
    const key = `${field}\u0000${message}`
    if (seen.has(key)) continue
    seen.add(key)
    result.push({ field, message })
  }
  return result
}
