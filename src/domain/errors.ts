/** What the table says of one error. */
export interface ErrorEntry {
  /** The HTTP status it is answered with. */
  readonly status: number
  /** Other statuses that carry the same code, where the status says which failure it was. */
  readonly alsoStatuses?: readonly number[]
  /** The `response_code` clients see: stable, never reused for another meaning. */
  readonly responseCode: string
  /** What it means, for people reading the API's documentation (not the localised `response_text`). */
  readonly meaning: string
}

/**
 * Every error the service answers with has a stable code. This table is the
 * one source of its documentation: the status and `response_code` the
 * mapper answers with, and the meaning the OpenAPI document and
 * docs/errors.md give (both written by `npm run openapi`). Each locale file
 * holds exactly these codes under `errors.<code>`, the localised text (a
 * test checks it).
 */
export const errorTable = {
  VALIDATION_FAILED: {
    status: 400,
    responseCode: '100',
    meaning:
      'validation failed; `errors` names each field (the first 10), or `body` when the JSON holds more values, deeper nesting or a longer string than any valid request',
  },
  MALFORMED_BODY: { status: 400, responseCode: '101', meaning: 'the body is not valid JSON' },
  COMMAND_MISMATCH: { status: 400, responseCode: '102', meaning: '`command` does not match the endpoint' },
  ROOT_ROLE_NOT_REGISTRABLE: { status: 400, responseCode: '103', meaning: '`super_admin` cannot be registered' },
  PERMISSION_NOT_IN_CATALOG: { status: 400, responseCode: '104', meaning: 'the `obj`/`act` pair is not active in the catalog' },
  ROOT_ROLE_NOT_GRANTABLE: { status: 400, responseCode: '105', meaning: 'the target is a root sub-role or a root user (it already holds everything)' },
  OVERRIDE_OUTSIDE_HOME_DOMAIN: { status: 400, responseCode: '106', meaning: "a merchant user's override outside its merchant" },
  LOGIN_UNAVAILABLE: { status: 400, responseCode: '107', meaning: 'login is unavailable: tokens come from an external issuer' },
  ROOT_ROLE_NOT_CHANGEABLE: { status: 400, responseCode: '108', meaning: '`super_admin` cannot be given or taken away by a sub-role change' },
  CURRENT_PASSWORD_WRONG: { status: 400, responseCode: '109', meaning: 'the current password is wrong (`errors` names `current_password`)' },
  EXPIRY_NOT_IN_FUTURE: { status: 400, responseCode: '110', meaning: "an override's `expires_at` is not in the future" },
  PLATFORM_PERMISSION_IN_MERCHANT: {
    status: 400,
    responseCode: '111',
    meaning: 'a grant, deny or override of a `platform` pair (catalog `scope`: system-owner users only) in a merchant domain or for a merchant user',
  },
  CHANGE_REVISION_INVALID: {
    status: 400,
    responseCode: '122',
    meaning: '`after` is not a revision of this store (not decimal digits, or past its current revision)',
  },
  CHANGE_EVENT_ID_INVALID: { status: 400, responseCode: '123', meaning: '`Last-Event-ID` is not `<revision>.<index>` of a revision of this store' },
  DUPLICATE_CHANGE: {
    status: 400,
    responseCode: '120',
    meaning: 'apply-permission-changes: a change repeats an earlier one of the list (same kind, holder, domain and pair); `errors` names `changes.<index>`',
  },
  CONTRADICTING_CHANGES: {
    status: 400,
    responseCode: '121',
    meaning: 'apply-permission-changes: two changes of the list act on the same holder, domain and pair with different kinds; `errors` names `changes.<index>` of the later one',
  },
  DECISION_CURSOR_INVALID: { status: 400, responseCode: '114', meaning: '`cursor` is not a `next_cursor` the decisions list gave' },
  UNAUTHENTICATED: { status: 401, responseCode: '200', meaning: 'no token' },
  INVALID_TOKEN: {
    status: 401,
    responseCode: '201',
    meaning:
      'invalid token (signature, algorithm, issuer, audience, not yet valid; an unknown, deactivated or mismatching account; issued before a password change, a deactivation or reactivation, or a logout everywhere)',
  },
  TOKEN_EXPIRED: { status: 401, responseCode: '202', meaning: 'expired token' },
  BAD_CREDENTIALS: { status: 401, responseCode: '203', meaning: 'wrong e-mail or password (the same answer for both)' },
  SESSION_ENDED: { status: 401, responseCode: '204', meaning: 'the token was logged out (`POST /v2/auth/logout`)' },
  PERMISSION_DENIED: { status: 403, responseCode: '300', meaning: "the caller lacks the route's permission" },
  PRINCIPAL_TYPE_DENIED: { status: 403, responseCode: '301', meaning: "the caller's principal type may not do this" },
  PRIVILEGE_ESCALATION: {
    status: 403,
    responseCode: '302',
    meaning:
      'granting or denying what the caller does not hold itself in that domain, or past the instant its own holding expires; lifting a deny (a revoke, or an override replacing it) that would have counted past that instant; registering an account, or moving one, into a sub-role holding what the caller does not hold there for good',
  },
  ORIGINAL_PATH_AMBIGUOUS: {
    status: 403,
    responseCode: '303',
    meaning:
      'forward auth: the original path could be read differently by an upstream (a `;`, a backslash, an encoded `/`, `\\` or `.`, a dot or empty segment, a segment an upstream would trim (a trailing dot or space, `..%20`), a control character, Unicode whitespace or a format character, a broken or double escape), so it is refused before the route map, the reason logged with the request id',
  },
  ACCOUNT_BEYOND_CALLER: {
    status: 403,
    responseCode: '304',
    meaning:
      'changing the sub-role of, deactivating or reactivating an account that holds what the caller does not (a pair in its home domain, or a root sub-role); the text names the first',
  },
  ROUTE_NOT_FOUND: { status: 404, responseCode: '400', meaning: 'no such endpoint' },
  USER_NOT_FOUND: { status: 404, responseCode: '401', meaning: "user not found, or outside the caller's merchant" },
  MERCHANT_NOT_FOUND: { status: 404, responseCode: '402', meaning: 'the domain names no merchant' },
  SUB_ROLE_NOT_FOUND: { status: 404, responseCode: '403', meaning: 'with `SUB_ROLES_EXPLICIT=true`, the sub-role was never created in the domain or in `global`' },
  EMAIL_TAKEN: { status: 409, responseCode: '500', meaning: 'the e-mail is already registered (case-insensitive)' },
  MERCHANT_EXISTS: { status: 409, responseCode: '501', meaning: 'the merchant already exists' },
  LAST_SYSTEM_OWNER: { status: 409, responseCode: '502', meaning: 'the last active system-owner `super_admin` cannot be deactivated' },
  SUB_ROLE_EXISTS: { status: 409, responseCode: '503', meaning: 'a sub-role with this code exists in that domain' },
  CHANGES_EXPIRED: {
    status: 410,
    responseCode: '508',
    meaning:
      'the changes after that revision are no longer kept (`CHANGE_RETENTION_DAYS`): re-read the policy, then resume after the revision `resume_after` names',
  },
  BODY_TOO_LARGE: { status: 413, responseCode: '600', meaning: 'the body is over 1 MiB' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, responseCode: '601', meaning: 'the body is not `application/json`' },
  RATE_LIMITED: { status: 429, responseCode: '602', meaning: 'too many requests (`Retry-After` says when to try again)' },
  METHOD_NOT_ALLOWED: { status: 405, responseCode: '603', meaning: 'the path does not answer this method (`Allow` lists those it does)' },
  BAD_REQUEST: {
    status: 400,
    alsoStatuses: [408, 414, 431],
    responseCode: '604',
    meaning:
      'the request cannot be processed: a bad URL or content length (400), a parameter too long (414), headers over 16 KB (431), a request, body included, not received within `REQUEST_TIMEOUT_MS` (408), malformed HTTP (400, written on the socket with `Connection: close`)',
  },
  CHANGE_STREAMS_PER_ADDRESS: {
    status: 429,
    responseCode: '608',
    meaning: 'this client address holds `CHANGE_STREAMS_PER_ADDRESS` change streams already',
  },
  CHANGE_STREAM_BEHIND: {
    status: 429,
    responseCode: '609',
    meaning:
      "the change stream's last event (`event: error`) before it closes: the client left more than `CHANGE_STREAM_BUFFER_BYTES` unread; reconnect with `Last-Event-ID`",
  },
  INTERNAL: { status: 500, responseCode: '900', meaning: 'a bug; the cause is logged with the request id, never returned' },
  NOT_READY: { status: 503, responseCode: '901', meaning: 'the database does not answer or the policy is not loaded' },
  STORAGE_UNAVAILABLE: { status: 503, responseCode: '901', meaning: 'the database is unavailable (unreachable, timed out, connection dropped); try again' },
  REVISION_NOT_REACHED: { status: 503, responseCode: '902', meaning: 'this server has not reached `min_revision` within `MIN_REVISION_WAIT_MS`' },
  POLICY_STALE: {
    status: 503,
    responseCode: '903',
    meaning: 'this server could not confirm its policy is current for `MAX_STALENESS_MS` (it fails closed)',
  },
  EXT_AUTHZ_REQUEST_INCOMPLETE: {
    status: 400,
    responseCode: '117',
    meaning: "gRPC ext_authz: the check request names no HTTP method or path (`attributes.request.http`); answered `INVALID_ARGUMENT`",
  },
  GRPC_REQUEST_TIMEOUT: {
    status: 408,
    responseCode: '606',
    meaning: 'gRPC: a call whose request did not arrive whole within `REQUEST_TIMEOUT_MS`; answered `DEADLINE_EXCEEDED`',
  },
} as const satisfies Record<string, ErrorEntry>

export type ErrorCode = keyof typeof errorTable

export interface FieldError {
  field: string
  message: string
}

/** What an answer carries beside its code and text, for a client to act on. */
export interface ErrorDetails {
  /** 410 `508`: the revision to resume after, once the policy is read again. */
  resume_after?: number
}

/** A broken rule or a refused request: never a bug. */
export class ServiceError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly params: Record<string, string | number> = {},
    readonly fieldErrors?: FieldError[],
    readonly details?: ErrorDetails,
  ) {
    super(code)
    this.name = 'ServiceError'
  }
}

export function isServiceError(error: unknown): error is ServiceError {
  return error instanceof ServiceError
}
