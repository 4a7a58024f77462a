/**
 * The authorisation matrix: every route the app declares, called by every
 * kind of caller (no token, a bad token, system-owner root, system-owner
 * staff with and without the route's permission, merchant root, merchant
 * staff with and without it, and the root and staff of another merchant),
 * with every kind of id the route takes (a user of m1, of m2, a system user,
 * an unknown id; domains; role codes; the pair being granted; the sub-role
 * and merchant of a registration). The status each cell must get is worked
 * out by `expected()` below from the rules
 * (authentication first, then principal type, then the route's permission in
 * the caller's home domain, then tenancy, domains and escalation), never
 * written down cell by cell. Every refused cell must leave every table as it
 * was, and answer with the error envelope.
 *
 * Routes without a rule here are still called by every caller: they get the
 * guard's rules (401, 301, 300), for routes that take a user id the tenancy
 * rule (404 `401` for users out of reach, never for users in reach), and
 * never a 5xx; what they do beyond that is left to their own tests.
 */
import type { Test } from 'tap'
import t from 'tap'
import type { PermissionDeclaration } from '../../src/domain/permissions.js'
import { UUID_PATTERN } from '../../src/domain/identifiers.js'
import type { Account } from '../../src/domain/principals.js'
import type { Queryable } from '../../src/storage/db.js'
import { insertDecisionEvents } from '../../src/storage/decisionEvents.js'
import { insertRule } from '../../src/storage/policyRows.js'
import { backend, buildTestApp, buildTestService, onboard, register, type TestApp } from '../helper.js'
import { decisionEvent } from '../support/decisionEvents.js'
import { errorShapeProblems } from '../support/envelope.js'
import { decodePayload, sign } from '../support/jwt.js'
import { apiRoutes, changedTables, cheapPasswords, declaredRoutes, fingerprint, type DeclaredRoute, type SchemaNode } from '../support/security.js'

const UNKNOWN_ID = '00000000-0000-4000-8000-00000000abcd'
const PASSWORD = 'matrix-pass-123'
const READ: Pair = { obj: 'permission', act: 'read' }
/** Every non-root caller holds this pair in its home domain; none holds NOT_HELD anywhere. */
const HELD: Pair = { obj: 'orders', act: 'read' }
const NOT_HELD: Pair = { obj: 'orders', act: 'refund' }

interface Pair {
  obj: string
  act: string
}
const pairName = (p: Pair): string => `${p.obj}:${p.act}`

// ------------------------------------------------------------------ the rules

type PrincipalType = 'system_owner' | 'merchant'

/** What the rules need to know about a caller: how it authenticates, who it is, what its sub-role holds at home. */
interface CallerModel {
  kind: string
  token: 'none' | 'invalid' | 'valid'
  principal: PrincipalType
  merchant: string | null
  root: boolean
  /** Pairs its sub-role is granted in its home domain (`global` for system owners). */
  grants: ReadonlySet<string>
}

interface UserModel {
  principal: PrincipalType
  merchant: string | null
}

type UserKind = 'm1_user' | 'm2_user' | 'system_user' | 'unknown' | 'absent'
/** The users a route's cells are about, made afresh for each route that takes one. */
const TARGET_KINDS = ['m1_user', 'm2_user', 'system_user'] as const
const USERS: Record<UserKind, UserModel | null> = {
  m1_user: { principal: 'merchant', merchant: 'm1' },
  m2_user: { principal: 'merchant', merchant: 'm2' },
  system_user: { principal: 'system_owner', merchant: null },
  unknown: null,
  absent: null,
}

/** The merchants that exist; `m404` never does. */
const EXISTING_DOMAINS = new Set(['global', 'm1', 'm2'])

const home = (who: UserModel): string => (who.principal === 'merchant' && who.merchant !== null ? who.merchant : 'global')

/** What a caller holds in a domain: a merchant caller nothing outside its merchant, root everything, else its sub-role's grants. */
function holds(caller: CallerModel, domain: string, pair: Pair): boolean {
  if (caller.principal === 'merchant' && caller.merchant !== domain) return false
  if (caller.root) return true
  return caller.grants.has(pairName(pair))
}

/** A merchant caller reaches users of its own merchant only; system owners reach everyone. */
function reachable(caller: CallerModel, target: UserModel | null): target is UserModel {
  if (target === null) return false
  return caller.principal === 'system_owner' || (target.principal === 'merchant' && target.merchant === caller.merchant)
}

/** Merchant callers are forced to their own merchant; system owners choose, with the endpoint's default. */
const resolveDomain = (caller: CallerModel, requested: string | undefined, fallback: string): string =>
  caller.principal === 'merchant' && caller.merchant !== null ? caller.merchant : (requested ?? fallback)

/** What one cell varies. */
interface Cell {
  caller: CallerModel
  user?: UserKind
  domain?: string
  pair?: 'held' | 'not_held'
  role?: 'ordinary' | 'root'
  subrole?: 'within' | 'beyond' | 'root'
  merchant?: string
}

type Outcome =
  | { kind: 'exact'; status: number; code: string | null; because: string }
  /** A route without a rule here: only that it passes the guard, and is not refused with a tenancy, guard or 5xx answer. */
  | { kind: 'passes'; because: string }

const ok = (status: number, because: string): Outcome => ({ kind: 'exact', status, code: null, because })
const refused = (status: number, code: string, because: string): Outcome => ({ kind: 'exact', status, code, because })

const pairOf = (cell: Cell): Pair => (cell.pair === 'not_held' ? NOT_HELD : HELD)

type Dimension = 'user' | 'optional_user' | 'domain' | 'user_domain' | 'pair' | 'role' | 'subrole' | 'merchant' | 'new_merchant'

interface Rule {
  /** What the cells of this route vary beyond the caller. */
  dimensions: Dimension[]
  /** The permission that tells "with" from "without" callers when the route itself declares none. */
  permission?: Pair
  decide(cell: Cell): Outcome
  /** What must hold of a successful answer's data, beyond its status: null when it does. */
  inspect?(cell: Cell, data: unknown): string | null
  /** Rows the route lists, written once its targets exist and before its first cell. */
  seed?(db: Queryable, targets: Targets): Promise<void>
}

/** A merchant caller's lists hold its own merchant's entries only. */
function ownMerchantOnly(field: 'merchant_id' | 'domain') {
  return ({ caller }: Cell, data: unknown): string | null => {
    if (caller.principal !== 'merchant') return null
    const items = (data as { items?: Array<Record<string, unknown>> }).items ?? []
    const foreign = items.filter((item) => item[field] !== caller.merchant)
    return foreign.length === 0 ? null : `${foreign.length} entries of other tenants listed: ${JSON.stringify(foreign[0])}`
  }
}

/**
 * The pair each target's sub-role holds since a move succeeded: the route's
 * cells share its targets, in order, and a non-root caller moves only an
 * account whose pairs it holds. Decided once per cell, before the next.
 */
const movedTo = new Map<UserKind, Pair>()

/** The handler's rules, for calls that got past authentication and the guard. */
const RULES: Record<string, Rule> = {
  'GET /healthz': { dimensions: [], decide: () => ok(200, 'public') },
  'GET /readyz': { dimensions: [], decide: () => ok(200, 'public') },
  'POST /v2/auth/login': { dimensions: [], decide: () => ok(200, 'public, good credentials') },
  'GET /v2/profile': { dimensions: [], decide: () => ok(200, 'any valid token') },
  'POST /v2/auth/logout': { dimensions: [], decide: () => ok(200, 'any valid token ends itself') },
  'GET /v2/profile/permissions': {
    dimensions: ['domain'],
    decide: ({ caller, domain }) => {
      const d = resolveDomain(caller, domain, home(caller))
      return EXISTING_DOMAINS.has(d) ? ok(200, `own set in ${d}`) : refused(404, '402', `no domain ${d}`)
    },
  },
  'GET /v2/admin/permissions/catalog': { dimensions: [], decide: () => ok(200, 'holds permission:read') },
  'GET /v2/admin/model/shadow': { dimensions: [], decide: () => ok(200, 'system owner holding permission:read') },
  'GET /v2/admin/permissions/holders': {
    dimensions: ['domain', 'pair'],
    decide: ({ caller, domain }) => {
      const d = resolveDomain(caller, domain, 'global')
      return EXISTING_DOMAINS.has(d) ? ok(200, `holders in ${d}`) : refused(404, '402', `no domain ${d}`)
    },
    // A merchant caller is answered about its own merchant, whatever it asked.
    inspect: ({ caller }, data) => {
      const { domain } = data as { domain?: string }
      return caller.principal === 'merchant' && domain !== caller.merchant ? `holders listed for ${domain}` : null
    },
  },
  'GET /v2/admin/permissions/audit-log': { dimensions: [], decide: () => ok(200, 'holds permission:read'), inspect: ownMerchantOnly('domain') },
  'GET /v2/admin/changes': {
    dimensions: [],
    decide: () => ok(200, 'holds permission:read'),
    // A merchant caller's changes are its own merchant's or global ones.
    inspect: ({ caller }, data) => {
      if (caller.principal !== 'merchant') return null
      const items = (data as { items?: Array<{ domain: string }> }).items ?? []
      const foreign = items.filter((item) => item.domain !== caller.merchant && item.domain !== 'global')
      return foreign.length === 0 ? null : `${foreign.length} changes of other tenants listed: ${JSON.stringify(foreign[0])}`
    },
  },
  // The stream ends after CHANGE_STREAM_MAX_MS (short in the tests); its events are checked in test/http/changes.test.ts.
  'GET /v2/admin/changes/stream': { dimensions: [], decide: () => ok(200, 'holds permission:read') },
  'GET /v2/admin/decisions': {
    dimensions: ['optional_user'],
    decide: () => ok(200, 'holds permission:read; a user out of reach is a filter that matches nothing'),
    // One decision about each target: exactly those in the caller's reach and the filter are listed.
    seed: (db, targets) =>
      insertDecisionEvents(
        db,
        TARGET_KINDS.map((kind, i) =>
          decisionEvent(
            { id: targets.ids[kind] ?? UNKNOWN_ID, principal_type: USERS[kind]?.principal ?? 'merchant', merchant_id: USERS[kind]?.merchant ?? null, sub_role_code: 'matrix_target' },
            { decision_id: `matrix-${kind}`, time: `2030-04-01T00:00:0${i}.000000Z`, ...HELD },
          ),
        ),
      ),
    inspect: ({ caller, user }, data) => {
      const listed = ((data as { items?: Array<{ decision_id: string }> }).items ?? []).map((item) => item.decision_id).sort()
      const wanted = TARGET_KINDS.filter((kind) => (user === undefined || user === 'absent' || user === kind) && reachable(caller, USERS[kind]))
      const expectedIds = wanted.map((kind) => `matrix-${kind}`).sort()
      return JSON.stringify(listed) === JSON.stringify(expectedIds) ? null : `listed ${listed.join(', ') || 'nothing'}, expected ${expectedIds.join(', ') || 'nothing'}`
    },
  },
  'GET /v2/admin/accounts': { dimensions: ['merchant'], decide: () => ok(200, 'holds admin:read'), inspect: ownMerchantOnly('merchant_id') },
  'GET /v2/admin/accounts/:userId': {
    dimensions: ['user'],
    decide: ({ caller, user }) => (reachable(caller, USERS[user ?? 'absent']) ? ok(200, 'an account in reach') : refused(404, '401', 'user out of reach')),
  },
  'POST /v2/admin/accounts/:userId/sub-role': {
    dimensions: ['user', 'subrole'],
    decide: ({ caller, user, subrole }) => {
      const target = USERS[user ?? 'absent']
      if (!reachable(caller, target)) return refused(404, '401', 'user out of reach')
      if (subrole === 'root') return refused(400, '108', 'super_admin is not given by a sub-role change')
      const kind = user as UserKind
      const held = movedTo.get(kind)
      if (!caller.root && held !== undefined && !holds(caller, home(target), held)) {
        return refused(403, '304', `the account holds ${pairName(held)} in ${home(target)}, the caller does not`)
      }
      const rolePair = subrole === 'within' ? HELD : NOT_HELD
      if (!caller.root && !holds(caller, home(target), rolePair)) return refused(403, '302', `the sub-role holds ${pairName(rolePair)} in ${home(target)}, the caller does not`)
      movedTo.set(kind, rolePair)
      return ok(200, 'moved')
    },
  },
  ...Object.fromEntries(
    ['deactivate', 'reactivate'].map((verb): [string, Rule] => [
      `POST /v2/admin/accounts/:userId/${verb}`,
      {
        dimensions: ['user'],
        decide: ({ caller, user }) => (reachable(caller, USERS[user ?? 'absent']) ? ok(200, `${verb}d`) : refused(404, '401', 'user out of reach')),
      },
    ]),
  ),
  // Every caller sends a current password that is not its own.
  'POST /v2/profile/password': { dimensions: [], decide: () => refused(400, '109', 'the current password is wrong') },
  'GET /v2/admin/permissions/roles/:subRoleCode': {
    dimensions: ['domain', 'role'],
    decide: ({ caller, domain }) => {
      const d = resolveDomain(caller, domain, 'global')
      return EXISTING_DOMAINS.has(d) ? ok(200, `listing in ${d}`) : refused(404, '402', `no domain ${d}`)
    },
  },
  'GET /v2/admin/permissions/users/:userId': {
    dimensions: ['user', 'user_domain'],
    decide: ({ caller, user, domain }) => {
      const target = USERS[user ?? 'absent']
      if (!reachable(caller, target)) return refused(404, '401', 'user out of reach')
      const d = resolveDomain(caller, domain, home(target))
      return EXISTING_DOMAINS.has(d) ? ok(200, `effective set in ${d}`) : refused(404, '402', `no domain ${d}`)
    },
  },
  'POST /v2/admin/permissions/roles/:subRoleCode/grant': { dimensions: ['domain', 'role', 'pair'], decide: (cell) => roleChange(cell, 'grant') },
  'DELETE /v2/admin/permissions/roles/:subRoleCode/revoke': { dimensions: ['domain', 'role', 'pair'], decide: (cell) => roleChange(cell, 'revoke') },
  'POST /v2/admin/permissions/users/:userId/grant': { dimensions: ['user', 'user_domain', 'pair'], decide: (cell) => userChange(cell, 'grant') },
  'POST /v2/admin/permissions/users/:userId/deny': { dimensions: ['user', 'user_domain', 'pair'], decide: (cell) => userChange(cell, 'deny') },
  'DELETE /v2/admin/permissions/users/:userId/revoke': { dimensions: ['user', 'user_domain', 'pair'], decide: (cell) => userChange(cell, 'revoke') },
  'GET /v2/authz/check': { dimensions: ['optional_user'], permission: READ, decide: (cell) => checkAbout(cell) },
  'POST /v2/authz/check-batch': { dimensions: ['optional_user'], permission: READ, decide: (cell) => checkAbout(cell) },
  'GET /v2/authz/verify': {
    dimensions: ['domain', 'pair'],
    decide: ({ caller, domain, pair }) => {
      const d = domain ?? home(caller)
      return holds(caller, d, pairOf({ caller, ...(pair !== undefined ? { pair } : {}) }))
        ? ok(204, `holds the pair in ${d}`)
        : refused(403, '300', `does not hold the pair in ${d}`)
    },
  },
  // Forward auth in prefix form decides from the route map alone; these tests configure none, so nothing the client
  // sends (its path, its query naming a pair) may get anyone a 200.
  ...Object.fromEntries(
    ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((method): [string, Rule] => [
      `${method} /v2/authz/verify/*`,
      { dimensions: [], decide: () => refused(403, '300', 'no route map names a pair') },
    ]),
  ),
  'POST /v2/admin/register': {
    dimensions: ['merchant', 'subrole'],
    decide: ({ caller, merchant, subrole }) => {
      if (subrole === 'root') return refused(400, '103', 'super_admin is never registered')
      const placed = caller.principal === 'merchant' ? caller.merchant : (merchant ?? null)
      const newHome = placed ?? 'global'
      const rolePair = subrole === 'within' ? HELD : NOT_HELD
      if (!caller.root && !holds(caller, newHome, rolePair)) return refused(403, '302', `the sub-role holds ${pairName(rolePair)} in ${newHome}, the caller does not`)
      if (placed !== null && !EXISTING_DOMAINS.has(placed)) return refused(404, '402', `no merchant ${placed}`)
      return ok(201, `registered in ${newHome}`)
    },
  },
  'POST /v2/admin/merchants': {
    dimensions: ['new_merchant'],
    decide: ({ merchant }) => (merchant === 'm1' ? refused(409, '501', 'merchant exists') : ok(201, 'new merchant')),
  },
}

function roleChange(cell: Cell, action: 'grant' | 'revoke'): Outcome {
  const { caller } = cell
  const domain = resolveDomain(caller, cell.domain, 'global')
  if (!EXISTING_DOMAINS.has(domain)) return refused(404, '402', `no domain ${domain}`)
  if (action === 'grant' && cell.role === 'root') return refused(400, '105', 'root sub-roles take no grants')
  if (!caller.root && !holds(caller, domain, pairOf(cell))) return refused(403, '302', `caller lacks ${pairName(pairOf(cell))} in ${domain}`)
  return ok(200, `${action} in ${domain}`)
}

function userChange(cell: Cell, action: 'grant' | 'deny' | 'revoke'): Outcome {
  const { caller } = cell
  const target = USERS[cell.user ?? 'absent']
  if (!reachable(caller, target)) return refused(404, '401', 'user out of reach')
  const domain = resolveDomain(caller, cell.domain, home(target))
  if (target.principal === 'merchant' && domain !== home(target)) return refused(400, '106', `a merchant user's override outside ${home(target)}`)
  if (!EXISTING_DOMAINS.has(domain)) return refused(404, '402', `no domain ${domain}`)
  if (!caller.root && !holds(caller, domain, pairOf(cell))) return refused(403, '302', `caller lacks ${pairName(pairOf(cell))} in ${domain}`)
  return ok(200, `${action} in ${domain}`)
}

/** The check endpoints: about oneself with any token; about another user with permission:read and within reach. */
function checkAbout({ caller, user }: Cell): Outcome {
  if (user === undefined || user === 'absent') return ok(200, 'asks about itself')
  if (!holds(caller, home(caller), READ)) return refused(403, '300', 'asking about others needs permission:read')
  if (!reachable(caller, USERS[user])) return refused(404, '401', 'user out of reach')
  return ok(200, 'asks about a user in reach')
}

/**
 * The expected answer of one cell. Authentication before anything (even
 * before the body is read), then the principal type, then the route's
 * permission in the caller's home domain, then the handler's rules.
 */
function expected(route: DeclaredRoute, rule: Rule | undefined, cell: Cell): Outcome {
  const { caller } = cell
  if (!route.public) {
    if (caller.token === 'none') return refused(401, '200', 'no token')
    if (caller.token === 'invalid') return refused(401, '201', 'invalid token')
    if (route.principalTypes !== undefined && !route.principalTypes.includes(caller.principal)) return refused(403, '301', `${caller.principal} may not`)
    if (route.permission !== undefined && !holds(caller, home(caller), route.permission)) return refused(403, '300', `lacks ${pairName(route.permission)} at home`)
  }
  if (rule !== undefined) return rule.decide(cell)
  if (cell.user !== undefined && cell.user !== 'absent' && !reachable(caller, USERS[cell.user])) return refused(404, '401', 'user out of reach')
  return { kind: 'passes', because: 'past the guard' }
}

// ------------------------------------------------------------------ the world

const roleKey = (p: Pair): string => `${p.obj}_${p.act}`.replace(/[^a-z0-9_]/g, '_')

interface Callers {
  /** Callers whose "with"/"without" is about `permission`. */
  forPermission(permission: Pair): Array<{ model: CallerModel; token: string | null }>
}

async function buildCallers(ta: TestApp, routePermissions: Pair[]): Promise<{ callers: Callers; m1Owner: Account }> {
  const m1Owner = await onboard(ta, 'm1')
  const m2Owner = await onboard(ta, 'm2')
  // The callers' grants are a hundred-odd rows: written in one transaction and loaded once, not a request each.
  const rules: string[][] = []
  const grant = (role: string, pair: Pair, domain: string) => rules.push([role, domain, pair.obj, pair.act, 'allow'])
  const allRoute = [...new Map([...routePermissions, READ].map((p) => [pairName(p), p])).values()]
  const byPermission = new Map<string, Array<{ model: CallerModel; token: string | null }>>()
  const valid = (account: Account) => ta.tokenFor(account)
  const rootModel = (kind: string, principal: PrincipalType, merchant: string | null): CallerModel => ({ kind, token: 'valid', principal, merchant, root: true, grants: new Set() })
  const fixed = [
    { model: { ...rootModel('no token', 'system_owner', null), token: 'none' as const }, token: null },
    {
      model: { ...rootModel('invalid token', 'system_owner', null), token: 'invalid' as const },
      token: sign({ sub: ta.root.id, principal_type: 'system_owner', exp: Math.floor(Date.now() / 1000) + 3600 }, 'not-the-service-secret-0123456789'),
    },
    { model: rootModel('system-owner root', 'system_owner', null), token: ta.rootToken },
    { model: rootModel('m1 root', 'merchant', 'm1'), token: valid(m1Owner) },
    { model: rootModel('m2 root (another merchant)', 'merchant', 'm2'), token: valid(m2Owner) },
  ]
  for (const permission of allRoute) {
    const key = roleKey(permission)
    const withGrants = new Set([pairName(permission), pairName(HELD)])
    const withoutGrants = new Set([...allRoute.filter((p) => pairName(p) !== pairName(permission)).map(pairName), pairName(HELD)])
    const make = async (kind: string, role: string, principal: PrincipalType, merchant: string | null, grants: Set<string>) => {
      const domain = merchant ?? 'global'
      for (const name of grants) {
        const [obj = '', act = ''] = name.split(':')
        grant(role, { obj, act }, domain)
      }
      const account = await register(ta, { email: `${kind.replace(/\W+/g, '-')}-${key}@matrix.example`, sub_role_code: role, password: PASSWORD, ...(merchant !== null ? { merchant_id: merchant } : {}) })
      return { model: { kind, token: 'valid' as const, principal, merchant, root: false, grants }, token: valid(account) }
    }
    byPermission.set(pairName(permission), [
      ...fixed,
      await make('system-owner staff with it', `sw_${key}`, 'system_owner', null, withGrants),
      await make('system-owner staff without it', `sx_${key}`, 'system_owner', null, withoutGrants),
      await make('m1 staff with it', `mw_${key}`, 'merchant', 'm1', withGrants),
      await make('m1 staff without it', `mx_${key}`, 'merchant', 'm1', withoutGrants),
      await make('m2 staff with it (another merchant)', `mw_${key}`, 'merchant', 'm2', withGrants),
    ])
  }
  grant('matrix_within', HELD, 'global')
  grant('matrix_beyond', NOT_HELD, 'global')
  await ta.service.db.transaction(async (tx) => {
    for (const rule of rules) await insertRule(tx, 'p', rule)
  })
  await ta.service.reload()
  return {
    m1Owner,
    callers: {
      forPermission(permission) {
        const found = byPermission.get(pairName(permission))
        if (found === undefined) throw new Error(`no callers for ${pairName(permission)}`)
        return found
      },
    },
  }
}

/** Another token of the account `token` names. */
function anotherToken(ta: TestApp, token: string | null): string {
  const account = ta.service.accounts.peek(String(decodePayload(token ?? '').sub))
  if (account === undefined) throw new Error('a valid caller names a known account')
  return ta.tokenFor(account)
}

// ------------------------------------------------------------------ requests

/** The values a dimension takes. */
function valuesOf(dimension: Dimension): Array<Partial<Cell>> {
  switch (dimension) {
    case 'user':
      return (['m1_user', 'm2_user', 'system_user', 'unknown'] as const).map((user) => ({ user }))
    case 'optional_user':
      return (['absent', 'm1_user', 'm2_user', 'system_user', 'unknown'] as const).map((user) => ({ user }))
    case 'domain':
      return [{}, { domain: 'global' }, { domain: 'm1' }, { domain: 'm2' }, { domain: 'm404' }]
    case 'user_domain':
      // The target's home by default, and another merchant's domain (forced for merchant callers, refused for merchant users).
      return [{}, { domain: 'm2' }]
    case 'pair':
      return [{ pair: 'held' }, { pair: 'not_held' }]
    case 'role':
      return [{ role: 'ordinary' }, { role: 'root' }]
    case 'subrole':
      return [{ subrole: 'within' }, { subrole: 'beyond' }, { subrole: 'root' }]
    case 'merchant':
      return [{}, { merchant: 'm1' }, { merchant: 'm2' }, { merchant: 'm404' }]
    case 'new_merchant':
      return [{ merchant: 'new' }, { merchant: 'm1' }]
  }
}

function product(dimensions: Dimension[]): Array<Partial<Cell>> {
  return dimensions.reduce<Array<Partial<Cell>>>((cells, d) => cells.flatMap((cell) => valuesOf(d).map((v) => ({ ...cell, ...v }))), [{}])
}

const isUuidField = (node: SchemaNode | undefined): boolean => node?.pattern === UUID_PATTERN

/** Names of the fields (path, query or command data) that carry a user id. */
function userIdFields(route: DeclaredRoute): string[] {
  const data = route.body?.properties?.data?.properties ?? {}
  return [route.params?.properties ?? {}, route.querystring?.properties ?? {}, data].flatMap((props) => Object.keys(props).filter((k) => isUuidField(props[k])))
}

let serial = 0

/** A value for a field no dimension sets: required fields only, so that the request is otherwise well formed. */
function sampleFor(name: string, node: SchemaNode | undefined): unknown {
  serial++
  if (name === 'email') return `cell-${serial}@matrix.example`
  if (name === 'current_password') return 'not-the-current-password-1'
  if (name.includes('password')) return PASSWORD
  if (name === 'name') return 'Matrix cell'
  if (name === 'sub_role_code' || name === 'subRoleCode') return 'matrix_new'
  if (name === 'merchant_id') return `mx-new-${serial}`
  if (name === 'obj') return HELD.obj
  if (name === 'act') return HELD.act
  if (name === 'checks') return [{ ...HELD }]
  const type = Array.isArray(node?.type) ? node?.type[0] : node?.type
  if (type === 'integer' || type === 'number') return 1
  if (type === 'boolean') return false
  if (type === 'array') return []
  if (type === 'object') return {}
  return 'matrix'
}

interface Targets {
  ids: Record<UserKind, string | undefined>
}

/** The field values a cell sets, by field name. */
function cellValues(cell: Cell, targets: Targets, route: DeclaredRoute, login: { email: string } | null): Map<string, unknown> {
  const values = new Map<string, unknown>()
  if (cell.user !== undefined) for (const field of userIdFields(route)) values.set(field, targets.ids[cell.user])
  if (cell.domain !== undefined) values.set('domain', cell.domain)
  if (cell.pair !== undefined) {
    values.set('obj', pairOf(cell).obj)
    values.set('act', pairOf(cell).act)
  }
  if (cell.role !== undefined) values.set('subRoleCode', cell.role === 'root' ? 'super_admin' : 'matrix_role')
  if (cell.subrole !== undefined) values.set('sub_role_code', { within: 'matrix_within', beyond: 'matrix_beyond', root: 'super_admin' }[cell.subrole])
  if (cell.merchant !== undefined) values.set('merchant_id', cell.merchant === 'new' ? `mx-new-${++serial}` : cell.merchant)
  if (login !== null) {
    values.set('email', login.email)
    values.set('password', PASSWORD)
  }
  return values
}

function fieldsOf(node: SchemaNode | undefined, values: Map<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = {}
  const required = new Set(node?.required ?? [])
  for (const [name, child] of Object.entries(node?.properties ?? {})) {
    if (values.has(name)) {
      const value = values.get(name)
      if (value !== undefined) result[name] = value
    } else if (required.has(name)) {
      result[name] = sampleFor(name, child)
    }
  }
  return result
}

function requestFor(route: DeclaredRoute, values: Map<string, unknown>): { url: string; body: unknown } {
  const path = route.url
    .replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => encodeURIComponent(String(values.get(name) ?? sampleFor(name, route.params?.properties?.[name]))))
    // A wildcard stands for a client's own request, whose query names a pair as if it could choose one.
    .replace(/\*$/, 'orders/1?obj=orders&act=read')
  const query = new URLSearchParams(Object.entries(fieldsOf(route.querystring, values)).map(([k, v]) => [k, String(v)])).toString()
  const data = route.body?.properties?.data
  const body =
    route.body === undefined ? undefined : { command: route.body.properties?.command?.const, ...(data !== undefined ? { data: fieldsOf(data, values) } : {}) }
  return { url: query === '' ? path : `${path}?${query}`, body }
}

// ------------------------------------------------------------------ the run

const AUTH_CODES = new Set(['200', '201', '202'])

function check(outcome: Outcome, status: number, code: string | undefined): string | null {
  if (outcome.kind === 'exact') {
    const expectedCode = outcome.code ?? '001'
    const ok = status === outcome.status && (code === undefined || code === expectedCode)
    return ok ? null : `expected ${outcome.status} ${expectedCode} (${outcome.because}), got ${status} ${code ?? ''}`
  }
  if (status >= 500) return `got ${status} ${code ?? ''}`
  if (code !== undefined && AUTH_CODES.has(code)) return `a valid token refused: ${status} ${code} (${outcome.because})`
  if (code === '401') return `a user in reach answered as not found (${status} ${code})`
  return null
}

t.test(`authorisation matrix over every declared route (${backend})`, async (t) => {
  const started = Date.now()
  const ta = await buildTestApp(t, { service: await buildTestService(t, { passwords: cheapPasswords() }) })
  // HEAD answers as GET does, without a body to read a code from; the fuzz covers it.
  const routes = apiRoutes(await declaredRoutes(ta.service)).filter((r) => r.method !== 'HEAD')
  const routePermissions = routes.flatMap((r) => (r.permission !== undefined ? [r.permission as PermissionDeclaration] : []))
  const { callers } = await buildCallers(ta, routePermissions.map((p) => ({ obj: p.obj, act: p.act })))
  const login = await register(ta, { email: 'login@matrix.example', sub_role_code: 'matrix_login', password: PASSWORD })
  t.comment(`world built in ${((Date.now() - started) / 1000).toFixed(1)} s`)

  const db = ta.service.db
  let current = await fingerprint(db)
  let cells = 0
  const unruled: string[] = []

  for (const [index, route] of routes.entries()) {
    const id = `${route.method} ${route.url}`
    const rule = RULES[id]
    if (rule === undefined) unruled.push(id)
    const userFields = userIdFields(route)
    const dimensions: Dimension[] = rule?.dimensions ?? (userFields.length > 0 ? ['user'] : [])
    const permission = route.permission ?? rule?.permission ?? READ

    // Fresh targets for every route that takes a user id: one route's writes (a deactivation, say) never change another's cells.
    const targets: Targets = { ids: { m1_user: undefined, m2_user: undefined, system_user: undefined, unknown: UNKNOWN_ID, absent: undefined } }
    if (dimensions.includes('user') || dimensions.includes('optional_user')) {
      targets.ids.m1_user = (await register(ta, { email: `t${index}-m1@matrix.example`, sub_role_code: 'matrix_target', merchant_id: 'm1', password: PASSWORD })).id
      targets.ids.m2_user = (await register(ta, { email: `t${index}-m2@matrix.example`, sub_role_code: 'matrix_target', merchant_id: 'm2', password: PASSWORD })).id
      targets.ids.system_user = (await register(ta, { email: `t${index}-so@matrix.example`, sub_role_code: 'matrix_target', password: PASSWORD })).id
      current = await fingerprint(db)
    }
    if (rule?.seed !== undefined) await rule.seed(db, targets)

    await t.test(id, async (t: Test) => {
      const mismatches: string[] = []
      let routeCells = 0
      for (const { model, token } of callers.forPermission(permission)) {
        for (const variation of product(dimensions)) {
          const cell: Cell = { caller: model, ...variation }
          const values = cellValues(cell, targets, route, id === 'POST /v2/auth/login' ? login : null)
          const { url, body } = requestFor(route, values)
          // A logout ends the token it is sent with: it gets one of its own, and the caller keeps its token for the other routes.
          const sent = id === 'POST /v2/auth/logout' && model.token === 'valid' ? anotherToken(ta, token) : token
          const res = await ta.call({ method: route.method as 'GET', url, token: sent, ...(body !== undefined ? { body } : {}) })
          routeCells++
          const outcome = expected(route, rule, cell)
          const json = /^application\/json/.test(String(res.headers['content-type'])) && res.body !== ''
          const code = json ? (JSON.parse(res.body) as { response_code?: string }).response_code : undefined
          const where = `${model.kind} ${JSON.stringify(variation)} ${route.method} ${url}`
          const problem = check(outcome, res.statusCode, code)
          if (problem !== null) mismatches.push(`${where}: ${problem} ${res.body.slice(0, 200)}`)
          else if (code === '001' && rule?.inspect !== undefined) {
            const wrong = rule.inspect(cell, (JSON.parse(res.body) as { data: unknown }).data)
            if (wrong !== null) mismatches.push(`${where}: ${wrong}`)
          }
          const after = await fingerprint(db)
          const refusal = res.statusCode < 200 || res.statusCode >= 300
          if (refusal) {
            const changed = changedTables(current, after)
            if (changed.length > 0) mismatches.push(`${where}: refused with ${res.statusCode} but changed ${changed.join(', ')}`)
            const shape = errorShapeProblems(res)
            if (shape.length > 0) mismatches.push(`${where}: ${shape.join('; ')}`)
          }
          current = after
        }
      }
      cells += routeCells
      t.same(mismatches, [], `${routeCells} cells${rule === undefined ? ' (no rule here: guard and tenancy only)' : ''}`)
    })
  }

  t.comment(`matrix cells: ${cells} over ${routes.length} routes in ${((Date.now() - started) / 1000).toFixed(1)} s (${backend})`)
  if (unruled.length > 0) t.comment(`routes checked by the guard and tenancy rules only: ${unruled.join(', ')}`)
  const ruled = new Set(routes.map((r) => `${r.method} ${r.url}`))
  t.same(Object.keys(RULES).filter((k) => !ruled.has(k)), [], 'every rule names a declared route')
})
