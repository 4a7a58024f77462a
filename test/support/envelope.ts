import type { LightMyRequestResponse } from 'fastify'

/** What must never reach a client: stack frames, error class names, SQL, table names, source paths. */
export const INTERNALS = /\n\s*at |\bat [\w.<>]+ \(|\bat file:|Error:|\bSELECT\b|\bINSERT\b|\bUPDATE\b|\bFROM\b|admin_accounts|casbin_rule|permission_audit|node_modules|\.[jt]s:\d+/

/**
 * Everything wrong with an error answer's shape; an
 * empty list when it is `{response_code, response_text, errors?}` with a
 * code other than 001, a non-empty text and well-formed field errors.
 */
export function errorShapeProblems(res: Pick<LightMyRequestResponse, 'body' | 'headers'>): string[] {
  const problems: string[] = []
  if (!/^application\/json/.test(String(res.headers['content-type']))) problems.push(`content-type ${String(res.headers['content-type'])}`)
  let body: unknown
  try {
    body = JSON.parse(res.body)
  } catch {
    return [...problems, 'body is not JSON']
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [...problems, 'body is not an object']
  const record = body as Record<string, unknown>
  const extra = Object.keys(record).filter((k) => !['response_code', 'response_text', 'errors'].includes(k))
  if (extra.length > 0) problems.push(`unexpected keys ${extra.join(',')}`)
  if (typeof record.response_code !== 'string' || !/^\d{3}$/.test(record.response_code)) problems.push('response_code is not a 3-digit string')
  if (record.response_code === '001') problems.push('an error answers 001')
  if (typeof record.response_text !== 'string' || record.response_text.length === 0) problems.push('response_text is empty')
  if ('data' in record) problems.push('an error carries data')
  if (record.errors !== undefined) {
    if (!Array.isArray(record.errors) || record.errors.length === 0) problems.push('errors is not a non-empty list')
    else {
      for (const item of record.errors as unknown[]) {
        const entry = item as Record<string, unknown>
        const keys = Object.keys(entry ?? {}).sort().join(',')
        if (keys !== 'field,message' || typeof entry.field !== 'string' || typeof entry.message !== 'string') {
          problems.push(`bad field error ${JSON.stringify(item)}`)
        }
      }
    }
  }
  if (INTERNALS.test(res.body)) problems.push('internals in the body')
  return problems
}
