import type { ErrorCode } from '../../domain/errors.js'

/**
 * What the OpenAPI document says about one operation beyond its route's
 * schema (parameters and bodies come from there).
 */
export interface OperationDoc {
  /** The command's name: kebab-case, unique, what clients generate method names from. */
  operationId: string
  /** One short sentence. */
  summary: string
  /** Longer notes, when the summary leaves something out a client needs. */
  description?: string
  /** What a success answers, for the success status's description. */
  returns: string
  /** The name under components.schemas of the success answer's `data` (absent when the answer has no body). */
  data?: string
  /**
   * The errors the operation itself answers. The codes the route's options
   * imply (authentication, the permission guard, validation, the revision
   * hooks, the rate limit) are added from those options: see routeErrors.
   */
  errors: readonly ErrorCode[]
  /** Wording of a code for this operation, where the general meaning would mislead. */
  notes?: Partial<Record<ErrorCode, string>>
}

/**
 * Every documented route, keyed by `METHOD /path` as the route declares it
 * (`:param` segments). A new route needs an entry here, then `npm run openapi`
 * to write openapi.json and docs/api.md again; test/http/openapi.test.ts fails
 * until both are done.
 */
export const OPERATIONS: Readonly<Record<string, OperationDoc>> = {
  'GET /healthz': {
    operationId: 'get-health',
    summary: 'Tell whether the process is up.',
    returns: 'the process is up (`status` is `ok`)',
    data: 'HealthStatus',
    errors: [],
  },
  'GET /readyz': {
    operationId: 'get-readiness',
    summary: 'Tell whether the database answers and the policy is loaded and confirmed current.',
    returns: 'ready to serve (`status` is `ready`)',
    data: 'HealthStatus',
    errors: ['NOT_READY', 'POLICY_STALE'],
    notes: { POLICY_STALE: 'the policy has not been confirmed current for `MAX_STALENESS_MS`' },
  },
  'POST /v2/auth/login': {
    operationId: 'login',
    summary: 'Exchange an e-mail and password for an access token.',
    description:
      'Attempts are limited per client address (`LOGIN_RATE_LIMIT_PER_MINUTE`) and per e-mail: `LOGIN_ACCOUNT_FAILURES` failures in 15 minutes from one address (an IPv6 /64), and ten times that from all addresses except those the account logged in from in the last 30 days, counted by every server; change-password failures count too. A limited answer carries `Retry-After`. A deactivated account fails like a wrong password.',
    returns: 'a bearer token (`Cache-Control: no-store`)',
    data: 'AccessToken',
    errors: ['LOGIN_UNAVAILABLE', 'BAD_CREDENTIALS', 'RATE_LIMITED', 'STORAGE_UNAVAILABLE'],
    notes: { RATE_LIMITED: 'too many attempts from this address, or too many failures for this e-mail from this address or in all (`Retry-After` says when to try again)' },
  },
  'POST /v2/auth/logout': {
    operationId: 'logout',
    summary: 'End the presented token, or every token of the account.',
    description:
      'From then on the token is refused (401 `204`) on every route and every server, forward auth and checks included, within the staleness bound (`MAX_STALENESS_MS`). It is remembered until it would have expired, and no longer. `everywhere: true` ends every token issued to the account until now (401 `201` afterwards), an external issuer\'s included; so does the logout of a token without a `jti`, which cannot be told apart from the others.',
    returns: 'the revision of the logout',
    data: 'LoggedOut',
    errors: [],
  },

  'GET /v2/profile': {
    operationId: 'get-profile',
    summary: "Read the caller's own account.",
    description:
      '`must_change_password` is true while the account signs in with a generated password (the first start\'s, or one `password reset` printed); `POST /v2/profile/password` clears it. The API serves such an account as any other: the console asks for a new password before anything else.',
    returns: "the caller's account",
    data: 'Profile',
    errors: [],
  },
  'GET /v2/profile/permissions': {
    operationId: 'get-own-permissions',
    summary: "List the caller's own effective permissions in a domain.",
    description: 'The domain defaults to the caller\'s home domain; merchant callers always get their own merchant.',
    returns: "the caller's effective permissions",
    data: 'UserPermissions',
    errors: ['MERCHANT_NOT_FOUND'],
  },
  'POST /v2/profile/password': {
    operationId: 'change-password',
    summary: "Change the caller's own password.",
    description:
      'Every token issued before is refused afterwards; the answer carries a fresh one (unless tokens come from an external issuer). A wrong `current_password` counts as a failed login of the account, under the same limits; a change clears them.',
    returns: 'the revision of the change and a fresh token',
    data: 'PasswordChanged',
    errors: ['CURRENT_PASSWORD_WRONG', 'RATE_LIMITED'],
    notes: { RATE_LIMITED: 'too many failed password checks for this account (`Retry-After` says when to try again)' },
  },

  'GET /v2/admin/accounts': {
    operationId: 'list-admins',
    summary: 'List administrator accounts, newest first.',
    description: 'Filters (merchant, sub-role, status, a search in e-mail or name) combine with AND. Merchant callers see their own merchant\'s accounts only.',
    returns: 'one page of accounts and the total',
    data: 'AccountPage',
    errors: [],
  },
  'GET /v2/admin/accounts/:userId': {
    operationId: 'get-admin',
    summary: 'Read one administrator account.',
    returns: 'the account',
    data: 'Account',
    errors: ['USER_NOT_FOUND'],
  },
  'POST /v2/admin/accounts/:userId/sub-role': {
    operationId: 'change-sub-role',
    summary: 'Move an account to another sub-role in its home domain.',
    description: 'A non-root caller must hold everything the account holds there and everything the new sub-role holds there (not only until an override of its own expires); `super_admin` is neither given nor taken away this way.',
    returns: 'whether anything changed, the revision and the account',
    data: 'AccountChange',
    errors: ['USER_NOT_FOUND', 'ROOT_ROLE_NOT_CHANGEABLE', 'ACCOUNT_BEYOND_CALLER', 'PRIVILEGE_ESCALATION', 'SUB_ROLE_NOT_FOUND'],
    notes: {
      ACCOUNT_BEYOND_CALLER: 'the account holds a permission the caller lacks in its home domain (the text names the first)',
      PRIVILEGE_ESCALATION: 'the new sub-role holds a permission the caller lacks in the account\'s home domain, or holds only until an override of its own expires',
    },
  },
  'POST /v2/admin/accounts/:userId/deactivate': {
    operationId: 'deactivate-admin',
    summary: 'Switch an account off: its tokens and logins are refused at once.',
    returns: 'whether anything changed, the revision and the account',
    data: 'AccountChange',
    errors: ['USER_NOT_FOUND', 'ACCOUNT_BEYOND_CALLER', 'LAST_SYSTEM_OWNER'],
    notes: { ACCOUNT_BEYOND_CALLER: 'the account is root, or holds a permission the caller lacks in its home domain (root callers switch any account); the text names the first' },
  },
  'POST /v2/admin/accounts/:userId/reactivate': {
    operationId: 'reactivate-admin',
    summary: 'Switch an account on again.',
    returns: 'whether anything changed, the revision and the account',
    data: 'AccountChange',
    errors: ['USER_NOT_FOUND', 'ACCOUNT_BEYOND_CALLER'],
    notes: { ACCOUNT_BEYOND_CALLER: 'the account is root, or holds a permission the caller lacks in its home domain (root callers switch any account); the text names the first' },
  },
  'POST /v2/admin/register': {
    operationId: 'register-admin',
    summary: 'Create an administrator account below super_admin.',
    description: 'Merchant callers always register into their own merchant. A non-root caller may only give the new account a sub-role whose permissions it holds itself.',
    returns: 'the new account and the revision',
    data: 'CreatedAccount',
    errors: ['ROOT_ROLE_NOT_REGISTRABLE', 'PRIVILEGE_ESCALATION', 'MERCHANT_NOT_FOUND', 'EMAIL_TAKEN', 'SUB_ROLE_NOT_FOUND'],
    notes: {
      VALIDATION_FAILED: 'validation failed (a reserved `merchant_id` among them); `errors` names each field',
      PRIVILEGE_ESCALATION: 'the sub-role holds a permission the caller lacks in the new account\'s domain',
      MERCHANT_NOT_FOUND: '`merchant_id` names no merchant',
    },
  },
  'POST /v2/admin/merchants': {
    operationId: 'onboard-merchant',
    summary: 'Create a merchant and its super_admin.',
    returns: "the merchant's super_admin and the revision",
    data: 'CreatedAccount',
    errors: ['MERCHANT_EXISTS', 'EMAIL_TAKEN'],
    notes: {
      VALIDATION_FAILED: 'validation failed (a reserved `merchant_id` among them); `errors` names each field',
      PRINCIPAL_TYPE_DENIED: 'only system owners onboard merchants',
    },
  },

  'GET /v2/admin/merchants': {
    operationId: 'list-merchants',
    summary: 'List merchants by id, with their names.',
    description:
      '`q` keeps the merchants whose id starts with it (as written) or whose `display_name` contains it, ignoring case. `display_name` is the merchant\'s name for people: its id when it was onboarded without one. `admins` counts each merchant\'s accounts, active or not. Only system-owner callers get it.',
    returns: 'one page of merchants and the total',
    data: 'MerchantPage',
    errors: [],
    notes: { PRINCIPAL_TYPE_DENIED: 'merchant callers never get the list of merchants' },
  },
  'GET /v2/admin/sub-roles': {
    operationId: 'list-sub-roles',
    summary: 'List the sub-roles known in a domain, by code.',
    description:
      'Known in a domain: created there or in `global` (a `global` sub-role is a template known in every domain; the domain\'s own label wins over the template\'s), held by an account at home there, or granted something there or in `global`. Another merchant\'s sub-roles are never listed. `members` counts the active accounts at home in the domain holding it, `rules` its grants in the domain. The domain defaults to `global`; merchant callers always get their own merchant.',
    returns: 'one page of sub-roles and the total',
    data: 'SubRolePage',
    errors: ['MERCHANT_NOT_FOUND'],
  },
  'POST /v2/admin/sub-roles': {
    operationId: 'create-sub-role',
    summary: 'Create a sub-role with a label.',
    description:
      'It belongs to one domain: a merchant caller\'s own merchant, always; for system-owner callers `domain`, `global` by default (a template known in every domain). Codes are unique per domain: another merchant\'s sub-role of the same code neither blocks it nor is seen. Without `SUB_ROLES_EXPLICIT=true` a sub-role is also created by the first grant, registration or sub-role change naming it (without a label), in the domain where it is used, unless that domain or `global` has it.',
    returns: 'the sub-role, its domain and the revision',
    data: 'CreatedSubRole',
    errors: ['MERCHANT_NOT_FOUND', 'SUB_ROLE_EXISTS'],
    notes: { VALIDATION_FAILED: 'validation failed (`super_admin` among them); `errors` names each field' },
  },

  'POST /v2/admin/permissions/roles/:subRoleCode/grant': {
    operationId: 'grant-role-permission',
    summary: 'Grant a permission to a sub-role in a domain.',
    description: 'The domain defaults to `global`; merchant callers always grant in their own merchant. With `dry_run: true` the same checks run and nothing is written or audited: `preview` says who would gain or lose the pair.',
    returns: 'whether anything changed (would change, on a dry run) and the revision',
    data: 'RolePermissionChange',
    errors: ['MERCHANT_NOT_FOUND', 'PERMISSION_NOT_IN_CATALOG', 'PLATFORM_PERMISSION_IN_MERCHANT', 'ROOT_ROLE_NOT_GRANTABLE', 'PRIVILEGE_ESCALATION', 'SUB_ROLE_NOT_FOUND'],
    notes: { PLATFORM_PERMISSION_IN_MERCHANT: 'a `platform` pair (catalog `scope`) in a merchant domain: grant it in `global`' },
  },
  'DELETE /v2/admin/permissions/roles/:subRoleCode/revoke': {
    operationId: 'revoke-role-permission',
    summary: "Revoke a sub-role's grant of a permission in a domain.",
    description: 'With `dry_run: true` the same checks run and nothing is written or audited: `preview` says who would gain or lose the pair.',
    returns: 'whether anything changed (would change, on a dry run) and the revision',
    data: 'RolePermissionChange',
    errors: ['MERCHANT_NOT_FOUND', 'PERMISSION_NOT_IN_CATALOG', 'PRIVILEGE_ESCALATION', 'SUB_ROLE_NOT_FOUND'],
    notes: { PRIVILEGE_ESCALATION: 'a non-root caller may only revoke what it holds itself in that domain' },
  },
  'POST /v2/admin/permissions/users/:userId/grant': {
    operationId: 'grant-user-permission',
    summary: 'Allow one user a permission (a per-user override).',
    description: 'The domain defaults to the user\'s home domain. An allow replaces a deny for the same pair. With `dry_run: true` the same checks run and nothing is written or audited: `preview` says who would gain or lose the pair.',
    returns: 'whether anything changed (would change, on a dry run), the revision and the override',
    data: 'UserPermissionChange',
    errors: ['USER_NOT_FOUND', 'OVERRIDE_OUTSIDE_HOME_DOMAIN', 'MERCHANT_NOT_FOUND', 'PERMISSION_NOT_IN_CATALOG', 'PLATFORM_PERMISSION_IN_MERCHANT', 'ROOT_ROLE_NOT_GRANTABLE', 'PRIVILEGE_ESCALATION'],
    notes: {
      ROOT_ROLE_NOT_GRANTABLE: 'the user is root: overrides would not change its decisions',
      PRIVILEGE_ESCALATION: 'the caller does not hold the pair in that domain, holds it for less long than the override would count, or holds it for less long than a deny this replaces would have counted',
    },
  },
  'POST /v2/admin/permissions/users/:userId/deny': {
    operationId: 'deny-user-permission',
    summary: 'Deny one user a permission (a per-user override).',
    description: 'A deny wins over every allow, the user\'s roles included. It replaces an allow for the same pair. With `dry_run: true` the same checks run and nothing is written or audited: `preview` says who would gain or lose the pair.',
    returns: 'whether anything changed (would change, on a dry run), the revision and the override',
    data: 'UserPermissionChange',
    errors: ['USER_NOT_FOUND', 'OVERRIDE_OUTSIDE_HOME_DOMAIN', 'MERCHANT_NOT_FOUND', 'PERMISSION_NOT_IN_CATALOG', 'PLATFORM_PERMISSION_IN_MERCHANT', 'ROOT_ROLE_NOT_GRANTABLE', 'PRIVILEGE_ESCALATION'],
    notes: {
      ROOT_ROLE_NOT_GRANTABLE: 'the user is root: overrides would not change its decisions',
      PRIVILEGE_ESCALATION: 'the caller does not hold the pair in that domain, holds it for less long than the override would count, or holds it for less long than a deny this replaces would have counted',
    },
  },
  'DELETE /v2/admin/permissions/users/:userId/revoke': {
    operationId: 'revoke-user-permission',
    summary: "Remove a user's override of a permission, allow or deny.",
    description: 'Role grants stay. With `dry_run: true` the same checks run and nothing is written or audited: `preview` says who would gain or lose the pair.',
    returns: 'whether anything changed (would change, on a dry run) and the revision',
    data: 'UserPermissionChange',
    errors: ['USER_NOT_FOUND', 'OVERRIDE_OUTSIDE_HOME_DOMAIN', 'MERCHANT_NOT_FOUND', 'PERMISSION_NOT_IN_CATALOG', 'PRIVILEGE_ESCALATION'],
    notes: {
      PRIVILEGE_ESCALATION:
        'a non-root caller may only revoke what it holds itself in that domain, and lift a deny only if the deny would have stopped counting by the time its own holding ends',
    },
  },
  'POST /v2/admin/permissions/changes': {
    operationId: 'apply-permission-changes',
    summary: 'Apply up to 1,000 grants, denies and revokes of roles and users, all or none, in one revision.',
    description:
      "Each change is `{kind, sub_role | user_id, obj, act, domain?, expires_at?}` with `kind` one of `role_grant`, `role_deny`, `role_revoke`, `user_grant`, `user_deny`, `user_revoke`, and follows exactly the rules of its single command (its domain default, tenancy, escalation, catalog, expiry), judged as if the changes before it in the list had been written. " +
      'A role kind names `sub_role`, a user kind `user_id`; only `user_grant` and `user_deny` take `expires_at`. `role_deny` adds the role\'s deny row (as a grant, never to a root sub-role); `role_revoke` removes its allow row only. ' +
      'The call needs, in the caller\'s home domain, what each kind present needs on its own route: `permission:assign` for grants and denies, `permission:revoke` for revokes (one of them gets it past the guard). ' +
      'The first refusal answers with its own code, and `errors` names `changes.<index>` (or `changes.<index>.<field>` for a field the kind does not take or needs); nothing is written. ' +
      'Two changes of the same holder, domain and pair are refused: `120` when they are the same kind, `121` otherwise. ' +
      'Each change that alters anything is audited as its own entry; the whole list makes one revision. With `dry_run: true` the same checks run, nothing is written, and `preview` gives the net effect of the whole list (who gains and who loses which pair).',
    returns: 'the revision, how many changes altered anything, and each change\'s `changed` by index (a dry run adds `preview`)',
    data: 'AppliedPermissionChanges',
    errors: [
      'DUPLICATE_CHANGE',
      'CONTRADICTING_CHANGES',
      'USER_NOT_FOUND',
      'OVERRIDE_OUTSIDE_HOME_DOMAIN',
      'MERCHANT_NOT_FOUND',
      'SUB_ROLE_NOT_FOUND',
      'PERMISSION_NOT_IN_CATALOG',
      'PLATFORM_PERMISSION_IN_MERCHANT',
      'ROOT_ROLE_NOT_GRANTABLE',
      'EXPIRY_NOT_IN_FUTURE',
      'PRIVILEGE_ESCALATION',
    ],
    notes: {
      PERMISSION_DENIED: 'the caller lacks `permission:assign` (a grant or deny in the list) or `permission:revoke` (a revoke in the list) in its home domain',
      VALIDATION_FAILED: 'the body is not valid (more than 1,000 changes names `changes`), or a change names a field its kind does not take (`changes.<index>.<field>`)',
    },
  },
  'GET /v2/admin/permissions/catalog': {
    operationId: 'get-permission-catalog',
    summary: 'List the permission catalog.',
    description:
      "Each entry's `scope` is `platform` for a pair only system-owner users can ever use (`merchant:onboard`): it is granted, denied and overridden only in `global` and never for a merchant user (400 `111`), and no merchant user holds it, whatever the rows say. Every other pair is `any`.",
    returns: 'every catalog entry, active or not',
    data: 'PermissionCatalog',
    errors: [],
  },
  'GET /v2/admin/permissions/roles/:subRoleCode': {
    operationId: 'get-role-permissions',
    summary: "List a sub-role's permissions in a domain.",
    description: 'A root sub-role lists the whole active catalog; any other its grants in the domain and in `global`, minus what it is denied there.',
    returns: "the sub-role's permissions",
    data: 'RolePermissions',
    errors: ['MERCHANT_NOT_FOUND'],
  },
  'GET /v2/admin/permissions/users/:userId': {
    operationId: 'get-user-permissions',
    summary: "List a user's effective permissions in a domain.",
    returns: "the user's effective permissions",
    data: 'UserPermissions',
    errors: ['USER_NOT_FOUND', 'MERCHANT_NOT_FOUND'],
  },
  'GET /v2/admin/permissions/holders': {
    operationId: 'list-permission-holders',
    summary: 'List every active user a check allows a permission in a domain.',
    description:
      "The domain defaults to `global`; merchant callers always get their own merchant and its users only. Each holder says how it holds the pair (`via`: `root`, `role`, or `user` for its own override). Sorted by e-mail; answered from memory, exactly as the check answers for each user.",
    returns: 'one page of holders and the total',
    data: 'PermissionHolders',
    errors: ['MERCHANT_NOT_FOUND'],
  },
  'GET /v2/admin/permissions/export': {
    operationId: 'export-policy',
    summary: 'Export the policy as a Casbin CSV file that model.conf reads.',
    description:
      'A header naming the format and the scope (`# policy-format: 1`, then `# scope: all` or `# scope: domain <id>`; `policy import` refuses a file whose scope is not the one it is asked to apply), then role rules and per-user overrides as `p` lines (an override that expires after its `# expires_at <RFC 3339>` comment, which Casbin skips) and assignments as `g` lines, sorted: the bytes `npm run -s cli -- policy export` prints. With `domain`, what decides in that domain: the rows of that domain and of `global`. Rules of pairs not active in the catalog decide nothing and are left out. Only system-owner callers with a root sub-role get it.',
    returns: 'the policy as `text/csv` (`Content-Disposition: attachment`)',
    errors: ['MERCHANT_NOT_FOUND'],
    notes: {
      PERMISSION_DENIED: 'the caller lacks `permission:read`, or its sub-role is not root',
      PRINCIPAL_TYPE_DENIED: 'merchant callers never get the policy file',
    },
  },
  'GET /v2/admin/permissions/audit-log': {
    operationId: 'get-permission-audit',
    summary: 'List the audit trail, newest first.',
    description: 'Filters combine with AND. Merchant callers see their own merchant\'s entries only, without the address of platform staff.',
    returns: 'one page of audit entries and the total',
    data: 'AuditPage',
    errors: [],
  },
  'GET /v2/admin/decisions': {
    operationId: 'list-decisions',
    summary: 'List the logged gateway decisions, newest first.',
    description:
      "The events the `postgres` decision sink stored. Filters combine with AND; `next_cursor` is passed back as `cursor` for the next page. Merchant callers see only decisions about their own merchant's users.",
    returns: 'one page of decision events and the cursor of the next',
    data: 'DecisionsPage',
    errors: ['DECISION_CURSOR_INVALID'],
  },

  'GET /v2/admin/model/shadow': {
    operationId: 'shadow-model-summary',
    summary: "The shadow model's comparisons with the live one since this server started.",
    description:
      'System-owner callers. `enabled: false` says why no decision is compared (none configured, or refused at start with its reason); otherwise the decisions compared and, per pair, the disagreements with up to five decision ids. Counts are per server and start again at each start.',
    returns: 'the shadow summary',
    data: 'ShadowSummary',
    errors: [],
  },

  'GET /v2/admin/changes': {
    operationId: 'list-changes',
    summary: 'List the committed changes decisions depend on after a revision, oldest first.',
    description:
      'Role and user grants, denies and revokes, expired overrides, assignments (a sub-role set or changed), account status and catalog changes, each with its revision, its index within the revision, its time and its actor. A page never splits a revision (it may run past `limit` to finish one); `next_after` is the `after` of the next page (the store\'s revision when the page is not full). Changes are kept `CHANGE_RETENTION_DAYS`; an `after` older than `horizon` answers 410 `508` with `resume_after`: read the policy again, then resume after that revision. Merchant callers see their own merchant\'s changes and the platform-wide ones (`global` role rules, the catalog), never another merchant\'s nor a staff account\'s.',
    returns: 'one page of changes, the next `after` and the horizon',
    data: 'ChangesPage',
    errors: ['CHANGE_REVISION_INVALID', 'CHANGES_EXPIRED'],
  },
  'GET /v2/admin/changes/stream': {
    operationId: 'stream-changes',
    summary: 'Follow the committed changes as Server-Sent Events.',
    description:
      'The items of `GET /v2/admin/changes`, one event each (`id: <revision>.<index>`, `data`: the item as JSON), first those after `after` (or right after the event `Last-Event-ID` names, which wins), then each change as this server applies it. A comment line every `CHANGE_STREAM_HEARTBEAT_MS`; the stream ends after `CHANGE_STREAM_MAX_MS` and at shutdown (reconnect with `Last-Event-ID`). A client that leaves more than `CHANGE_STREAM_BUFFER_BYTES` unread gets a last `event: error` (`609`) and is disconnected.',
    returns: 'the stream (`text/event-stream`)',
    errors: ['CHANGE_REVISION_INVALID', 'CHANGE_EVENT_ID_INVALID', 'CHANGES_EXPIRED', 'CHANGE_STREAMS_PER_ADDRESS'],
  },

  'GET /v2/admin/permissions/audit-log/verification': {
    operationId: 'verify-audit-chain',
    summary: "Check the audit trail's hash chain.",
    description:
      'Walks the rows written since the last verification found the chain whole (its checkpoint, kept in the database and moved forward only by a compare-and-set), in pages that leave the server free between them: `valid` is false when a row was edited, deleted or reordered, and `problem` says where. `full=true` walks every row from the first, as `npm run cli -- audit verify` does, and so also finds an edit behind the checkpoint; it is for root callers only. A full walk that finds a problem clears the checkpoint, so later visits report it too. Only system-owner callers get it (the chain spans every merchant).',
    returns: 'whether the chain holds, its rows found whole, the rows read this time and the first problem',
    data: 'AuditVerification',
    errors: [],
    notes: {
      PRINCIPAL_TYPE_DENIED: 'merchant callers never walk the whole trail',
      PERMISSION_DENIED: 'the caller lacks `permission:read`, or asks for `full=true` without a root sub-role (the permission named is then `super_admin`)',
    },
  },

  'GET /v2/authz/verify': {
    operationId: 'verify-request',
    summary: "Forward auth for proxies: may the token's own user do the pair?",
    description:
      'The pair comes from the query, else the `X-Authz-Obj`/`X-Authz-Act`/`X-Authz-Domain` headers, else the route map applied to `X-Original-Method` + `X-Original-URI` (or `X-Forwarded-Method` + `X-Forwarded-Uri`).',
    returns: 'allowed; `X-Authz-User-Id` (and `X-Authz-Merchant-Id` for merchant users) name the user for the upstream',
    errors: ['PERMISSION_DENIED', 'ORIGINAL_PATH_AMBIGUOUS'],
    notes: { PERMISSION_DENIED: 'the user may not do the pair, or no pair could be worked out from the request' },
  },
  'GET /v2/authz/check': {
    operationId: 'check-permission',
    summary: 'Ask whether a user may do obj:act in a domain.',
    description:
      'Without `user_id` the subject is the caller. The domain defaults to the subject\'s home domain. Answered from memory. With `explain=true` the answer also says why (`reason`: its kind, and the Casbin row that decided when one did); explaining needs `permission:read`, even about oneself.',
    returns: 'the decision',
    data: 'Decision',
    errors: ['PERMISSION_DENIED', 'USER_NOT_FOUND'],
    notes: {
      PERMISSION_DENIED: 'with `user_id` or `explain=true`, the caller lacks `permission:read`',
      USER_NOT_FOUND: 'no such `user_id`, or it is outside the caller\'s merchant',
    },
  },
  'POST /v2/authz/check-batch': {
    operationId: 'check-batch',
    summary: 'Ask up to 100 questions about one subject at once.',
    description: 'The answers come in request order, each with its domain resolved. Answered from memory. With `explain: true` each answer also says why, as a single check does.',
    returns: 'one decision per question',
    data: 'BatchDecisions',
    errors: ['PERMISSION_DENIED', 'USER_NOT_FOUND'],
    notes: {
      PERMISSION_DENIED: 'with `user_id` or `explain`, the caller lacks `permission:read`',
      USER_NOT_FOUND: 'no such `user_id`, or it is outside the caller\'s merchant',
    },
  },
}
