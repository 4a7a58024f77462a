import { errorTable, type ErrorCode, type FieldError } from '../domain/errors.js'
import type { Translate } from './index.js'

/** The error envelope every front end answers with (HTTP's body, ext_authz's denied body). */
export interface ErrorBody {
  response_code: string
  response_text: string
  errors?: FieldError[]
  /** A 410 of the change list: the revision to resume after once the policy is read again. */
  resume_after?: number
}

/** One error's envelope: its stable code and its text in the translator's locale. */
export function errorBody(code: ErrorCode, t: Translate, params: Record<string, unknown> = {}, errors?: FieldError[]): ErrorBody {
  const body: ErrorBody = { response_code: errorTable[code].responseCode, response_text: t(`errors.${code}`, params) }
  if (errors !== undefined && errors.length > 0) body.errors = errors
  return body
}
