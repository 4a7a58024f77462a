import type { RouteOptions } from 'fastify'
import { errorTable, type ErrorCode } from '../../domain/errors.js'

/** What each error means, as the document says it (the table of response codes in docs/errors.md, in short). */
export const ERROR_MEANINGS: Readonly<Record<ErrorCode, string>> = {
  VALIDATION_FAILED: 'validation failed; `errors` names each field',
  MALFORMED_BODY: 'the body is not valid JSON',
  COMMAND_MISMATCH: '`command` does not match the endpoint',
  ROOT_ROLE_NOT_REGISTRABLE: '`super_admin` cannot be registered',
  PERMISSION_NOT_IN_CATALOG: 'the `obj`/`act` pair is not active in the catalog',
  ROOT_ROLE_NOT_GRANTABLE: 'the target is a root sub-role or a root user (it already holds everything)',
  OVERRIDE_OUTSIDE_HOME_DOMAIN: "a merchant user's override outside its merchant",
  LOGIN_UNAVAILABLE: 'login is unavailable: tokens come from an external issuer',
  ROOT_ROLE_NOT_CHANGEABLE: '`super_admin` cannot be given or taken away by a sub-role change',
  CURRENT_PASSWORD_WRONG: 'the current password is wrong (`errors` names `current_password`)',
  EXPIRY_NOT_IN_FUTURE: '`expires_at` is not in the future',
  UNAUTHENTICATED: 'no token',
  INVALID_TOKEN: 'invalid token (signature, algorithm, issuer, audience, not yet valid; an unknown, deactivated or mismatching account; issued before a password change)',
  TOKEN_EXPIRED: 'expired token',
  BAD_CREDENTIALS: 'wrong e-mail or password (the same answer for both)',
  PERMISSION_DENIED: "the caller lacks the route's permission",
  PRINCIPAL_TYPE_DENIED: "the caller's principal type may not do this",
  PRIVILEGE_ESCALATION: 'granting or denying what the caller does not hold itself in that domain, or past the instant its own holding expires',
  ORIGINAL_PATH_AMBIGUOUS: 'forward auth: the original path could be read differently by an upstream (a `;`, a backslash, an encoded `/`, `\\` or `.`, a dot or empty segment, a control character, a broken or double escape), so it is refused before the route map',
  ROUTE_NOT_FOUND: 'no such endpoint',
  USER_NOT_FOUND: "user not found, or outside the caller's merchant",
  MERCHANT_NOT_FOUND: 'the domain names no merchant',
  SUB_ROLE_NOT_FOUND: 'with `SUB_ROLES_EXPLICIT=true`, the sub-role was never created',
  EMAIL_TAKEN: 'the e-mail is already registered (case-insensitive)',
  MERCHANT_EXISTS: 'the merchant already exists',
  SUB_ROLE_EXISTS: 'a sub-role with this code exists',
  LAST_SYSTEM_OWNER: 'the last active system-owner `super_admin` cannot be deactivated',
  BODY_TOO_LARGE: 'the body is over 1 MiB',
  UNSUPPORTED_MEDIA_TYPE: 'the body is not `application/json`',
  RATE_LIMITED: 'too many requests (`Retry-After` says when to try again)',
  METHOD_NOT_ALLOWED: 'the path does not answer this method (`Allow` lists those it does)',
  BAD_REQUEST: 'the request cannot be processed',
  INTERNAL: 'a bug; the cause is logged with the request id, never returned',
  NOT_READY: 'the database does not answer or the policy is not loaded',
  STORAGE_UNAVAILABLE: 'the database is unavailable; try again',
  REVISION_NOT_REACHED: 'this server has not reached `min_revision` within `MIN_REVISION_WAIT_MS`',
  POLICY_STALE: 'this server could not confirm its policy is current for `MAX_STALENESS_MS` (it fails closed)',
}

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
  errors.push('UNAUTHENTICATED', 'INVALID_TOKEN', 'TOKEN_EXPIRED', 'STORAGE_UNAVAILABLE')
  if (config.principalTypes !== undefined) errors.push('PRINCIPAL_TYPE_DENIED')
  if (config.permission !== undefined) errors.push('PERMISSION_DENIED')
  if (config.failClosedWhenStale === true) errors.push('POLICY_STALE')
  const reads = methods.some((m) => m === 'GET' || m === 'HEAD')
  if ((reads && route.url.startsWith('/v2/') && config.foreignQuery !== true) || config.minRevisionInBody === true) {
    errors.push('REVISION_NOT_REACHED')
  }
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
    meanings.push(notes[error] ?? ERROR_MEANINGS[error])
    codes.set(responseCode, meanings)
    byStatus.set(status, codes)
  }
  return [...byStatus]
    .sort(([a], [b]) => a - b)
    .map(([status, codes]) => ({
      status,
      codes: [...codes].sort(([a], [b]) => a.localeCompare(b)).map(([responseCode, meanings]) => ({ responseCode, meaning: meanings.join('; or ') })),
    }))
}

/** A response's description: a heading, then one line per `response_code`. */
export function describeStatus(status: number, codes: ReadonlyArray<{ responseCode: string; meaning: string }>): string {
  if (codes.length === 0) return `${statusHeading(status)}.`
  return [`${statusHeading(status)}:`, '', ...codes.map((c) => `- \`${c.responseCode}\`: ${c.meaning}`)].join('\n')
}
