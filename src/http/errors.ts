import type { ErrorObject } from 'ajv'
import { errorTable, isServiceError, type ErrorCode, type FieldError, type ServiceError } from '../domain/errors.js'
import type { Translate } from '../i18n/index.js'
import { errorBody, type ErrorBody } from '../i18n/errorBody.js'
import { localiseValidation } from '../schemas/validation.js'

export type { ErrorBody }

export interface MappedError {
  status: number
  body: ErrorBody
  /** True for a bug: the cause goes to the log, never to the client. */
  internal: boolean
}

interface FrameworkError {
  code?: string
  statusCode?: number
  validation?: ErrorObject[]
}

const frameworkCodes: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_JSON_BODY: 'MALFORMED_BODY',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'MALFORMED_BODY',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'BAD_REQUEST',
  FST_ERR_BAD_URL: 'BAD_REQUEST',
}

function build(code: ErrorCode, t: Translate, params: Record<string, unknown> = {}, errors?: FieldError[]): MappedError {
  const status = errorTable[code].status
  return { status, body: errorBody(code, t, params, errors), internal: status >= 500 }
}

/** A refusal of the service's own, with its parameters, field errors and details. */
export function mapServiceError(error: ServiceError, t: Translate): MappedError {
  const fields = error.fieldErrors?.map((f) => ({ field: f.field, message: t(`validation.${f.message}`) }))
  const mapped = build(error.code, t, error.params, fields)
  if (error.details !== undefined) Object.assign(mapped.body, error.details)
  return mapped
}

/** The one mapper from anything thrown to a status and a localised error envelope. */
export function mapError(error: unknown, t: Translate, limits: { bodyLimit: number }): MappedError {
  if (isServiceError(error)) return mapServiceError(error, t)
  const framework = (typeof error === 'object' && error !== null ? error : {}) as FrameworkError
  if (Array.isArray(framework.validation)) {
    const mismatch = framework.validation.find((e) => e.keyword === 'const' && e.instancePath === '/command')
    if (mismatch !== undefined) {
      return build('COMMAND_MISMATCH', t, { expected: String((mismatch.params as { allowedValue: unknown }).allowedValue) })
    }
    return build('VALIDATION_FAILED', t, {}, localiseValidation(framework.validation, t))
  }
  const known = framework.code !== undefined ? frameworkCodes[framework.code] : undefined
  if (known !== undefined) return build(known, t, { limit: limits.bodyLimit })
  // JSON.parse failures and other client errors the framework raises with a 4xx status.
  if (typeof framework.statusCode === 'number' && framework.statusCode >= 400 && framework.statusCode < 500) {
    if (framework.statusCode === 400) return build('MALFORMED_BODY', t)
    if (framework.statusCode === 413) return build('BODY_TOO_LARGE', t, { limit: limits.bodyLimit })
    if (framework.statusCode === 415) return build('UNSUPPORTED_MEDIA_TYPE', t)
    if (framework.statusCode === 405) return build('METHOD_NOT_ALLOWED', t)
    return { ...build('BAD_REQUEST', t), status: framework.statusCode }
  }
  return build('INTERNAL', t)
}
