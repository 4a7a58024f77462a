import type { RouteOptions } from 'fastify'
import { errorTable, type ErrorCode } from '../../domain/errors.js'
import { revisionChecks } from '../plugins/revision.js'
import { byCodeUnits } from '../../domain/textOrder.js'

/** The first words of a status's description. */
const STATUS_HEADINGS: Readonly<Record<number, string>> = {
  200: 'Success',
  201: 'Created',
  204: 'No content',
  400: 'Bad request',
  401: 'Not authenticated',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  413: 'Body too large',
  415: 'Unsupported media type',
  429: 'Too many requests',
  503: 'Unavailable',
}

export const statusHeading = (status: number): string => STATUS_HEADINGS[status] ?? `Status ${status}`

/** Methods whose requests Fastify reads a body for. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/** The command a body schema insists on (`{ command: <literal>, data }`), if any. */
function commandOf(body: unknown): string | undefined {
  const command = (body as { properties?: { command?: { const?: unknown } } } | undefined)?.properties?.command?.const
  return typeof command === 'string' ? command : undefined
}

/**
 * The errors a route's options and schema imply, read exactly as the plugins
 * read them when the route is declared (plugins/authentication.ts,
 * authorization.ts, revision.ts, the validator and the body parser, the rate
 * limit): so the document follows a route's options without an entry having
 * to repeat them.
 */
export function routeErrors(route: Pick<RouteOptions, 'method' | 'url' | 'config' | 'schema'>): ErrorCode[] {
  const config = route.config ?? {}
  const schema = route.schema ?? {}
  const methods = Array.isArray(route.method) ? route.method : [route.method]
  const errors: ErrorCode[] = []
  if (schema.querystring !== undefined || schema.params !== undefined || schema.body !== undefined) errors.push('VALIDATION_FAILED')
  if (methods.some((m) => BODY_METHODS.has(m))) errors.push('MALFORMED_BODY', 'BODY_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE')
  if (commandOf(schema.body) !== undefined) errors.push('COMMAND_MISMATCH')
  if (config.rateLimit !== undefined && config.rateLimit !== false) errors.push('RATE_LIMITED')
  if (config.public === true) return errors
  // An account not in this server's memory yet is read from the store while authenticating.
  errors.push('UNAUTHENTICATED', 'INVALID_TOKEN', 'TOKEN_EXPIRED', 'SESSION_ENDED', 'STORAGE_UNAVAILABLE')
  if (config.principalTypes !== undefined) errors.push('PRINCIPAL_TYPE_DENIED')
  if (config.permission !== undefined || config.anyPermission !== undefined) errors.push('PERMISSION_DENIED')
  const revision = revisionChecks(route)
  if (revision.failClosed) errors.push('POLICY_STALE')
  if (revision.minRevisionFromQuery || revision.minRevisionFromBody) errors.push('REVISION_NOT_REACHED')
  return errors
}

/** One status's error answers: the `response_code` values and what each means. */
export interface ErrorStatus {
  status: number
  codes: Array<{ responseCode: string; meaning: string }>
}

/** Errors grouped by status (ascending), each status's codes ascending; one line per code even when two errors share it. */
export function errorStatuses(errors: readonly ErrorCode[], notes: Partial<Record<ErrorCode, string>> = {}): ErrorStatus[] {
  const byStatus = new Map<number, Map<string, string[]>>()
  for (const error of new Set(errors)) {
    const { status, responseCode } = errorTable[error]
    const codes = byStatus.get(status) ?? new Map<string, string[]>()
    const meanings = codes.get(responseCode) ?? []
    meanings.push(notes[error] ?? errorTable[error].meaning)
    codes.set(responseCode, meanings)
    byStatus.set(status, codes)
  }
  return [...byStatus]
    .sort(([a], [b]) => a - b)
    .map(([status, codes]) => ({
      status,
      codes: [...codes].sort(([a], [b]) => byCodeUnits(a, b)).map(([responseCode, meanings]) => ({ responseCode, meaning: meanings.join('; or ') })),
    }))
}

/** A response's description: a heading, then one line per `response_code`. */
export function describeStatus(status: number, codes: ReadonlyArray<{ responseCode: string; meaning: string }>): string {
  if (codes.length === 0) return `${statusHeading(status)}.`
  return [`${statusHeading(status)}:`, '', ...codes.map((c) => `- \`${c.responseCode}\`: ${c.meaning}`)].join('\n')
}
