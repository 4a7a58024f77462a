import { createPublicKey } from 'node:crypto'
import jwt, { type FastifyJWTOptions } from '@fastify/jwt'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import buildGetJwks from 'get-jwks'
import { createVerifier } from 'fast-jwt'
import type { Caller } from '../../commands/context.js'
import type { Account } from '../../domain/principals.js'
import type { Config } from '../../config.js'
import { ServiceError } from '../../domain/errors.js'
import { normaliseIp } from '../../domain/clientIp.js'
import { PRINCIPAL_TYPES, type PrincipalType } from '../../domain/principals.js'
import { issuedAfterCredentialsChange } from '../../domain/sessions.js'
import type { AccountDirectory } from '../../storage/accountDirectory.js'
import { VerifiedTokenCache } from './tokenCache.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Reachable without a token (login, health, docs). */
    public?: boolean
  }
  interface FastifyRequest {
    caller: Caller | null
    /** The verified claims of the caller's token (a logout reads which token to end). */
    claims: TokenClaims | null
  }
}

export interface AuthenticationOptions {
  config: Pick<Config, 'jwt' | 'jwtIssuer' | 'jwtAudience'>
  accounts: AccountDirectory
  /** Verified tokens, shared with the gateway's fast path (gatewayFastPath.ts), which admits only what is found here. */
  verified?: VerifiedTokenCache<TokenClaims>
}

function keyAlgorithm(pem: string): 'RS256' | 'ES256' {
  const type = createPublicKey(pem).asymmetricKeyType
  if (type === 'rsa') return 'RS256'
  if (type === 'ec') return 'ES256'
  throw new Error(`JWT_PUBLIC_KEY must be an RSA or EC public key, not ${String(type)}`)
}

/** @fastify/jwt options for the configured key; algorithms are always pinned, so `alg: none` never verifies. */
function jwtOptions(options: AuthenticationOptions): FastifyJWTOptions {
  const { config } = options
  const claims = {
    requiredClaims: [
      'sub',
      'exp',
      ...(config.jwtIssuer !== undefined ? ['iss'] : []),
      ...(config.jwtAudience !== undefined ? ['aud'] : []),
    ],
    ...(config.jwtIssuer !== undefined ? { allowedIss: config.jwtIssuer } : {}),
    ...(config.jwtAudience !== undefined ? { allowedAud: config.jwtAudience } : {}),
  }
  if (config.jwt.mode === 'secret') {
    return { secret: config.jwt.secret, verify: { algorithms: ['HS256'], ...claims } }
  }
  if (config.jwt.mode === 'public-key') {
    return { secret: { public: config.jwt.publicKey }, verify: { algorithms: [keyAlgorithm(config.jwt.publicKey)], ...claims } }
  }
  const url = new URL(config.jwt.jwksUrl)
  const getJwks = buildGetJwks({ jwksPath: url.pathname, providerDiscovery: false, ttl: 600_000 })
  return {
    decode: { complete: true },
    secret: (_request: FastifyRequest, token: unknown) => {
      const header = (token as { header?: { kid?: string; alg?: string } }).header ?? {}
      return getJwks.getPublicKey({ domain: url.origin, kid: header.kid, alg: header.alg })
    },
    verify: { algorithms: ['RS256', 'ES256'], ...claims },
  }
}

/** The caller of one request; its address is worked out only when a write records it in the audit trail. */
class RequestCaller implements Caller {
  constructor(
    readonly account: Account,
    private readonly request: FastifyRequest,
  ) {}

  get ip(): string | null {
    return normaliseIp(this.request.ip)
  }
}

export interface TokenClaims {
  sub?: unknown
  principal_type?: unknown
  merchant_id?: unknown
  exp?: unknown
  /** The account's credentials version when the token was issued (absent: 0). */
  cv?: unknown
  /** When it was issued (seconds): what an external issuer's token is judged by. */
  iat?: unknown
  /** The token's own id: a logout ends it by this. */
  jti?: unknown
}

export const BEARER_PREFIX = 'Bearer '
const JWT_SHAPE = /^[A-Za-z0-9\-_]+\.[A-Za-z0-9\-_]+\.[A-Za-z0-9\-_]*$/

/**
 * Whether a credential uses the Bearer scheme, whose name is case-insensitive
 * (RFC 7235): `bearer` and `BEARER` are as good as `Bearer`. Asked only on a
 * cache miss: a header seen before, whatever its spelling, is found in the
 * cache as it is, with no string made.
 */
export function isBearer(header: string): boolean {
  if (header.startsWith(BEARER_PREFIX)) return true
  return header.length > BEARER_PREFIX.length && header.slice(0, BEARER_PREFIX.length).toLowerCase() === 'bearer '
}

function wellFormed(claims: TokenClaims): claims is TokenClaims & { sub: string } {
  return typeof claims.sub === 'string' && PRINCIPAL_TYPES.includes(claims.principal_type as PrincipalType)
}

/**
 * Whether a token's credentials are the account's current ones. Our own
 * tokens carry the credentials version they were issued under; an external
 * issuer's carry none, so their issue time is compared with the account's
 * last change of credentials (src/domain/sessions.ts). Chosen once, from the
 * configured key.
 */
export type CredentialsRule = (claims: TokenClaims, account: Account) => boolean

const byVersion: CredentialsRule = (claims, account) => (typeof claims.cv === 'number' ? claims.cv : 0) === account.credentials_version
const byIssueTime: CredentialsRule = (claims, account) => issuedAfterCredentialsChange(claims.iat, account.credentials_changed_at)

export function credentialsRule(mode: Config['jwt']['mode']): CredentialsRule {
  return mode === 'secret' ? byVersion : byIssueTime
}

/** Whether the token was logged out by itself (a logout everywhere moves the account's credentials instead). */
function loggedOut(claims: TokenClaims, accounts: AccountDirectory): boolean {
  return typeof claims.jti === 'string' && typeof claims.sub === 'string' && accounts.tokenEnded(claims.sub, claims.jti)
}

/**
 * Whether verified claims may act as this account: type and merchant agree,
 * and the account is active with the credentials the token was issued
 * under. Checked on every request against the account in memory (kept in
 * step on every server by the change feed), so a deactivation, a password
 * change or a logout refuses tokens at once, cached ones included.
 */
function agrees(claims: TokenClaims, account: Account, current: CredentialsRule): boolean {
  const tokenMerchant = typeof claims.merchant_id === 'string' ? claims.merchant_id : null
  return (
    account.principal_type === claims.principal_type &&
    account.merchant_id === tokenMerchant &&
    account.status === 'active' &&
    current(claims, account)
  )
}

/** Why claims already verified no longer admit their account (logged out; the account gone, deactivated, or its credentials changed), or null. */
function standing(claims: TokenClaims, account: Account | undefined, accounts: AccountDirectory, current: CredentialsRule): 'SESSION_ENDED' | 'INVALID_TOKEN' | null {
  if (loggedOut(claims, accounts)) return 'SESSION_ENDED'
  if (account === undefined || !agrees(claims, account, current)) return 'INVALID_TOKEN'
  return null
}

/**
 * What a new request with these verified claims would be refused with at
 * `now` (epoch milliseconds), or its account: for an answer that lasts (the
 * change stream), which must end once its token would no longer be accepted.
 */
export function tokenStandingNow(
  claims: TokenClaims,
  accounts: AccountDirectory,
  current: CredentialsRule,
  now: number,
): { refused: 'TOKEN_EXPIRED' | 'SESSION_ENDED' | 'INVALID_TOKEN' } | { account: Account } {
  if (typeof claims.exp !== 'number' || now >= claims.exp * 1000) return { refused: 'TOKEN_EXPIRED' }
  const account = typeof claims.sub === 'string' ? accounts.peek(claims.sub) : undefined
  const refused = standing(claims, account, accounts, current)
  if (refused !== null || account === undefined) return { refused: refused ?? 'INVALID_TOKEN' }
  return { account }
}

/**
 * The account an `Authorization` header admits without any asynchronous
 * step: its token verified before (in the cache), not logged out, and its
 * account in memory and agreeing. Undefined otherwise: the request then
 * takes the routes' own authentication, which verifies, looks up or refuses
 * with its envelope.
 */
export function cachedAccount(
  verified: VerifiedTokenCache<TokenClaims>,
  accounts: AccountDirectory,
  current: CredentialsRule,
  header: string | undefined,
): Account | undefined {
  if (header === undefined) return undefined
  const claims = verified.get(header)
  if (claims === undefined || !wellFormed(claims) || loggedOut(claims, accounts)) return undefined
  const account = accounts.peek(claims.sub)
  return account !== undefined && agrees(claims, account, current) ? account : undefined
}

/** What admitting a credential reads: verified tokens, the accounts in memory, and the rule for current credentials. */
interface AdmitDeps {
  verified: VerifiedTokenCache<TokenClaims>
  accounts: AccountDirectory
  current: CredentialsRule
}

/** A credential's verified claims and the account they act as. */
export interface Admitted {
  claims: TokenClaims
  account: Account
}

/** The claims and account when the claims were not logged out and name an account that agrees with them; else the refusal. */
function admitted(claims: TokenClaims, account: Account | null, deps: AdmitDeps): Admitted {
  const refused = standing(claims, account ?? undefined, deps.accounts, deps.current)
  if (refused !== null) throw new ServiceError(refused)
  if (account === null) throw new ServiceError('INVALID_TOKEN')
  return { claims, account }
}

/** First sight of a token, or an account not in memory yet: verify and look up asynchronously. */
async function verifyAndAdmit(header: string, cached: TokenClaims | undefined, deps: AdmitDeps, verify: () => Promise<TokenClaims>): Promise<Admitted> {
  let claims = cached
  if (claims === undefined) {
    try {
      claims = await verify()
    } catch (error) {
      const code = (error as { code?: string }).code
      throw new ServiceError(code === 'FST_JWT_AUTHORIZATION_TOKEN_EXPIRED' || code === 'FAST_JWT_EXPIRED' ? 'TOKEN_EXPIRED' : 'INVALID_TOKEN')
    }
    if (!wellFormed(claims)) throw new ServiceError('INVALID_TOKEN')
    deps.verified.set(header, claims)
  }
  if (!wellFormed(claims)) throw new ServiceError('INVALID_TOKEN')
  return admitted(claims, await deps.accounts.get(claims.sub), deps)
}

/**
 * The claims and account an `Authorization` header admits, by the rules of
 * every front end (the routes here, gRPC): without a promise when its token
 * was verified before and its account is in memory, which is most of the
 * gateway's traffic. Throws (or rejects with) the refusal.
 */
function admitHeader(header: string | undefined, deps: AdmitDeps, verify: () => Promise<TokenClaims>): Admitted | Promise<Admitted> {
  if (header === undefined || header === '') throw new ServiceError('UNAUTHENTICATED')
  // Only headers whose token verified are in the cache, so a hit needs no parsing.
  const claims = deps.verified.get(header)
  if (claims === undefined) {
    if (!isBearer(header) || !JWT_SHAPE.test(bearerToken(header))) throw new ServiceError('INVALID_TOKEN')
    return verifyAndAdmit(header, undefined, deps, verify)
  }
  const account = wellFormed(claims) ? deps.accounts.peek(claims.sub) : undefined
  if (account === undefined) return verifyAndAdmit(header, claims, deps, verify)
  return admitted(claims, account, deps)
}

function bearerToken(header: string): string {
  return header.slice(BEARER_PREFIX.length).trim()
}

/**
 * The account an `Authorization` header admits, for a front end without
 * Fastify's request (gRPC): the routes' rules, with a token cache of its own
 * and a verifier of the same key, algorithms and claims.
 */
export function headerAuthenticator(options: AuthenticationOptions): (header: string | undefined) => Account | Promise<Account> {
  const deps: AdmitDeps = {
    verified: options.verified ?? new VerifiedTokenCache<TokenClaims>(),
    accounts: options.accounts,
    current: credentialsRule(options.config.jwt.mode),
  }
  const verifyToken = tokenVerifier(jwtOptions(options))
  return (header) => {
    const result = admitHeader(header, deps, () => verifyToken(bearerToken(header as string)))
    return result instanceof Promise ? result.then((a) => a.account) : result.account
  }
}

/** fast-jwt's verifier for @fastify/jwt's options: the same key (or JWKS look-up), algorithms and required claims. */
function tokenVerifier({ secret, verify }: FastifyJWTOptions): (token: string) => Promise<TokenClaims> {
  const fixed = typeof secret === 'object' && !Buffer.isBuffer(secret) ? (secret as { public: string }).public : secret
  const verifier = createVerifier({
    ...(verify as object),
    // The JWKS look-up reads only the token's header, never the request.
    key: async (decoded: unknown) =>
      typeof fixed === 'function' ? ((await (fixed as (request: unknown, token: unknown) => Promise<string>)(undefined, decoded)) as string) : (fixed as string),
  })
  return async (token) => (await verifier(token)) as TokenClaims
}

/**
 * auth:admin. Verifies the bearer token, then loads the account it names (from
 * memory); a token whose type or merchant disagree with the account is refused.
 * The sub-role always comes from the account, never from the token.
 */
const authenticationPlugin: FastifyPluginAsync<AuthenticationOptions> = async (app, options) => {
  await app.register(jwt, jwtOptions(options))
  app.decorateRequest('caller', null)
  app.decorateRequest('claims', null)
  const deps: AdmitDeps = {
    verified: options.verified ?? new VerifiedTokenCache<TokenClaims>(),
    accounts: options.accounts,
    current: credentialsRule(options.config.jwt.mode),
  }

  const accept = (request: FastifyRequest, { claims, account }: Admitted): void => {
    request.caller = new RequestCaller(account, request)
    request.claims = claims
  }

  // Callback style: a token seen before with its account in memory is admitted
  // without a promise, which is most of the gateway's traffic.
  const authenticate = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    let result: Admitted | Promise<Admitted>
    try {
      result = admitHeader(request.headers.authorization, deps, () => request.jwtVerify<TokenClaims>())
    } catch (error) {
      return done(error as Error)
    }
    if (result instanceof Promise) {
      result.then((admittedCaller) => {
        accept(request, admittedCaller)
        done()
      }, done)
      return
    }
    accept(request, result)
    done()
  }

  // Attached to each non-public route when it is declared, so no request pays
  // for looking its route options up.
  app.addHook('onRoute', (route) => {
    if (route.config?.public === true) return
    route.onRequest = [...asArray(route.onRequest), authenticate]
  })
}

/** A route's hooks may be one function, a list, or none. */
export function asArray<T>(value: T | T[] | undefined): T[] {
  if (value === undefined) return []
  return Array.isArray(value) ? value : [value]
}

export default fp(authenticationPlugin, { fastify: '5.x', name: 'authentication' })

/** The token of the request's caller: its id (null when the issuer gave it none) and its expiry (epoch milliseconds). */
export function tokenOf(request: FastifyRequest): { jti: string | null; expiresAt: number } {
  const claims = request.claims
  if (claims === null || typeof claims.exp !== 'number') throw new ServiceError('UNAUTHENTICATED')
  return { jti: typeof claims.jti === 'string' ? claims.jti : null, expiresAt: claims.exp * 1000 }
}

/** The authenticated caller of a route that is not public. */
export function callerOf(request: FastifyRequest): Caller {
  if (request.caller === null) throw new ServiceError('UNAUTHENTICATED')
  return request.caller
}
