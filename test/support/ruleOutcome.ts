import { ServiceError } from '../../src/domain/errors.js'

/** The service code a rule answers with, or 'ok': the result a rule table compares. */
export function outcome(rule: () => unknown): string {
  try {
    rule()
    return 'ok'
  } catch (error) {
    if (error instanceof ServiceError) return error.code
    throw error
  }
}
