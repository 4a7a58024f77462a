/**
 * Every error the service answers with has a stable code. The table gives its
 * HTTP status and the `response_code` clients see; the message text comes from
 * the locale files (key `errors.<code>`). docs/errors.md lists the same table.
 */
export const errorTable = {
  VALIDATION_FAILED: { status: 400, responseCode: '100' },
  MALFORMED_BODY: { status: 400, responseCode: '101' },
  COMMAND_MISMATCH: { status: 400, responseCode: '102' },
  ROOT_ROLE_NOT_REGISTRABLE: { status: 400, responseCode: '103' },
  PERMISSION_NOT_IN_CATALOG: { status: 400, responseCode: '104' },
  ROOT_ROLE_NOT_GRANTABLE: { status: 400, responseCode: '105' },
  OVERRIDE_OUTSIDE_HOME_DOMAIN: { status: 400, responseCode: '106' },
  LOGIN_UNAVAILABLE: { status: 400, responseCode: '107' },
  ROOT_ROLE_NOT_CHANGEABLE: { status: 400, responseCode: '108' },
  CURRENT_PASSWORD_WRONG: { status: 400, responseCode: '109' },
  EXPIRY_NOT_IN_FUTURE: { status: 400, responseCode: '110' },
  UNAUTHENTICATED: { status: 401, responseCode: '200' },
  INVALID_TOKEN: { status: 401, responseCode: '201' },
  TOKEN_EXPIRED: { status: 401, responseCode: '202' },
  BAD_CREDENTIALS: { status: 401, responseCode: '203' },
  PERMISSION_DENIED: { status: 403, responseCode: '300' },
  PRINCIPAL_TYPE_DENIED: { status: 403, responseCode: '301' },
  PRIVILEGE_ESCALATION: { status: 403, responseCode: '302' },
  ORIGINAL_PATH_AMBIGUOUS: { status: 403, responseCode: '303' },
  ROUTE_NOT_FOUND: { status: 404, responseCode: '400' },
  USER_NOT_FOUND: { status: 404, responseCode: '401' },
  MERCHANT_NOT_FOUND: { status: 404, responseCode: '402' },
  SUB_ROLE_NOT_FOUND: { status: 404, responseCode: '403' },
  EMAIL_TAKEN: { status: 409, responseCode: '500' },
  MERCHANT_EXISTS: { status: 409, responseCode: '501' },
  LAST_SYSTEM_OWNER: { status: 409, responseCode: '502' },
  SUB_ROLE_EXISTS: { status: 409, responseCode: '503' },
  BODY_TOO_LARGE: { status: 413, responseCode: '600' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, responseCode: '601' },
  RATE_LIMITED: { status: 429, responseCode: '602' },
  METHOD_NOT_ALLOWED: { status: 405, responseCode: '603' },
  BAD_REQUEST: { status: 400, responseCode: '604' },
  INTERNAL: { status: 500, responseCode: '900' },
  NOT_READY: { status: 503, responseCode: '901' },
  STORAGE_UNAVAILABLE: { status: 503, responseCode: '901' },
  REVISION_NOT_REACHED: { status: 503, responseCode: '902' },
  POLICY_STALE: { status: 503, responseCode: '903' },
} as const satisfies Record<string, { status: number; responseCode: string }>

export type ErrorCode = keyof typeof errorTable

export interface FieldError {
  field: string
  message: string
}

/** A broken rule or a refused request: never a bug. */
export class ServiceError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly params: Record<string, string | number> = {},
    readonly fieldErrors?: FieldError[],
  ) {
    super(code)
    this.name = 'ServiceError'
  }
}

export function isServiceError(error: unknown): error is ServiceError {
  return error instanceof ServiceError
}
