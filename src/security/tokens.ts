import { randomBytes } from 'node:crypto'
import { createSigner } from 'fast-jwt'
import type { Account, PrincipalType } from '../domain/principals.js'

/** The claims an access token carries; the sub-role never travels in it. */
export interface AccessClaims {
  sub: string
  principal_type: PrincipalType
  merchant_id?: string
  /** The account's credentials version: a password change or reset refuses tokens of older versions. */
  cv: number
  /** This token's own id (128 random bits): a logout ends this token alone. */
  jti: string
}

export interface IssuedToken {
  access_token: string
  token_type: 'Bearer'
  expires_in: number
}

export interface TokenIssuer {
  issue(account: Pick<Account, 'id' | 'principal_type' | 'merchant_id'> & Partial<Pick<Account, 'credentials_version'>>, ttlSeconds?: number): IssuedToken
}

export interface TokenIssuerOptions {
  secret: string
  ttlSeconds: number
  issuer?: string | undefined
  audience?: string | undefined
}

function claimsFor(account: Pick<Account, 'id' | 'principal_type' | 'merchant_id'> & Partial<Pick<Account, 'credentials_version'>>): AccessClaims {
  return {
    sub: account.id,
    principal_type: account.principal_type,
    cv: account.credentials_version ?? 0,
    jti: randomBytes(16).toString('base64url'),
    ...(account.merchant_id !== null ? { merchant_id: account.merchant_id } : {}),
  }
}

/** HS256 tokens signed with the configured secret (login and `cli token`). */
export function createTokenIssuer(options: TokenIssuerOptions): TokenIssuer {
  return {
    issue(account, ttlSeconds = options.ttlSeconds) {
      const sign = createSigner({
        key: options.secret,
        algorithm: 'HS256',
        expiresIn: ttlSeconds * 1000,
        ...(options.issuer !== undefined ? { iss: options.issuer } : {}),
        ...(options.audience !== undefined ? { aud: options.audience } : {}),
      })
      return { access_token: sign({ ...claimsFor(account) }), token_type: 'Bearer', expires_in: ttlSeconds }
    },
  }
}
