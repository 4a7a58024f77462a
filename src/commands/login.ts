import { ServiceError } from '../domain/errors.js'
import type { Account } from '../domain/principals.js'
import type { PasswordHasher } from '../security/passwords.js'
import type { IssuedToken, TokenIssuer } from '../security/tokens.js'
import { findAccountByEmail } from '../storage/accounts.js'
import type { Queryable } from '../storage/db.js'

export interface LoginContext {
  db: Queryable
  passwords: PasswordHasher
  tokens: TokenIssuer | null
}

/** A wrong e-mail and a wrong password answer the same and cost the same (one argon2 verify each). */
export async function login(ctx: LoginContext, email: string, password: string): Promise<{ token: IssuedToken; account: Account }> {
  if (ctx.tokens === null) throw new ServiceError('LOGIN_UNAVAILABLE')
  const stored = await findAccountByEmail(ctx.db, email)
  const valid = await ctx.passwords.verify(stored?.password_hash ?? null, password)
  if (stored === null || !valid) throw new ServiceError('BAD_CREDENTIALS')
  const { password_hash: _hash, ...account } = stored
  return { token: ctx.tokens.issue(account), account }
}
