import { createPublicKey } from 'node:crypto'
import jwt, { type FastifyJWTOptions } from '@fastify/jwt'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import buildGetJwks from 'get-jwks'
import type { Caller } from '../../commands/context.js'
import type { Config } from '../../config.js'
import { ServiceError } from '../../domain/errors.js'
import { normaliseIp } from '../../domain/clientIp.js'
import { PRINCIPAL_TYPES, type PrincipalType } from '../../domain/principals.js'
import type { AccountDirectory } from '../../storage/accountDirectory.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Reachable without a token (login, health, docs). */
    public?: boolean
  }
  interface FastifyRequest {
    caller: Caller | null
  }
}

export interface AuthenticationOptions {
  config: Pick<Config, 'jwt' | 'jwtIssuer' | 'jwtAudience'>
  accounts: AccountDirectory
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
    requiredClaims: ['sub', 'exp'],
    // fast-jwt keeps verified tokens (and failures) for at most their lifetime, so a
    // token seen again skips the signature check.
    cache: 10_000,
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

interface TokenClaims {
  sub?: unknown
  principal_type?: unknown
  merchant_id?: unknown
}

const BEARER = /^Bearer +([A-Za-z0-9\-_]+\.[A-Za-z0-9\-_]+\.[A-Za-z0-9\-_]*)$/

/**
 * auth:admin. Verifies the bearer token, then loads the account it names (from
 * memory); a token whose type or merchant disagree with the account is refused.
 * The sub-role always comes from the account, never from the token.
 */
const authenticationPlugin: FastifyPluginAsync<AuthenticationOptions> = async (app, options) => {
  await app.register(jwt, jwtOptions(options))
  app.decorateRequest('caller', null)
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config.public === true) return
    const header = request.headers.authorization
    if (header === undefined || header === '') throw new ServiceError('UNAUTHENTICATED')
    if (!BEARER.test(header)) throw new ServiceError('INVALID_TOKEN')
    let claims: TokenClaims
    try {
      claims = await request.jwtVerify<TokenClaims>()
    } catch (error) {
      const code = (error as { code?: string }).code
      throw new ServiceError(code === 'FST_JWT_AUTHORIZATION_TOKEN_EXPIRED' ? 'TOKEN_EXPIRED' : 'INVALID_TOKEN')
    }
    if (typeof claims.sub !== 'string' || !PRINCIPAL_TYPES.includes(claims.principal_type as PrincipalType)) {
      throw new ServiceError('INVALID_TOKEN')
    }
    const account = await options.accounts.get(claims.sub)
    const tokenMerchant = typeof claims.merchant_id === 'string' ? claims.merchant_id : null
    if (account === null || account.principal_type !== claims.principal_type || account.merchant_id !== tokenMerchant) {
      throw new ServiceError('INVALID_TOKEN')
    }
    request.caller = { account, ip: normaliseIp(request.ip) }
  })
}

export default fp(authenticationPlugin, { fastify: '5.x', name: 'authentication' })

/** The authenticated caller of a route that is not public. */
export function callerOf(request: FastifyRequest): Caller {
  if (request.caller === null) throw new ServiceError('UNAUTHENTICATED')
  return request.caller
}
