import { ServiceError } from '../domain/errors.js'
import type { Account } from '../domain/principals.js'
import type { PasswordHasher } from '../security/passwords.js'
import type { IssuedToken, TokenIssuer } from '../security/tokens.js'
import { findAccountByEmail } from '../storage/accounts.js'
import type { Database } from '../storage/db.js'
import { admitLoginAttempt, forgetLoginAttempt } from '../storage/loginFailures.js'

export interface LoginContext {
  db: Database
  passwords: PasswordHasher
  tokens: TokenIssuer | null
  /** Failed attempts per e-mail within the window (LOGIN_ACCOUNT_FAILURES) before its login is refused unchecked. */
  maxFailures: number
}

/** 429 `602` for one account: its answer carries `Retry-After`. */
export class AccountLoginLimitedError extends ServiceError {
  constructor(readonly retryAfterSeconds: number) {
    super('RATE_LIMITED', { after: `${retryAfterSeconds} s` })
    this.name = 'AccountLoginLimitedError'
  }
}

/**
 * A wrong e-mail and a wrong password answer the same and cost the same (one
 * argon2 verify each), and both count against the e-mail's limit, so neither
 * the 401 nor the 429 tells whether an account exists. A limited e-mail is
 * refused before any look-up or hash work, whatever the password.
 *
 * A success does not clear earlier failures: they were guesses, and clearing
 * them would give a guesser a fresh budget every time the owner (or a script
 * using the account) logs in, so the bound would be per owner login rather
 * than per window. The owner's cost is that typos before a success still
 * count until they leave the window.
 */
export async function login(ctx: LoginContext, email: string, password: string): Promise<{ token: IssuedToken; account: Account }> {
  if (ctx.tokens === null) throw new ServiceError('LOGIN_UNAVAILABLE')
  const attempt = await admitLoginAttempt(ctx.db, email, ctx.maxFailures)
  if (!attempt.admitted) throw new AccountLoginLimitedError(attempt.retryAfterSeconds)
  const stored = await findAccountByEmail(ctx.db, email)
  const valid = await ctx.passwords.verify(stored?.password_hash ?? null, password)
  // A deactivated account's login fails exactly like a wrong password (after the same hash work).
  if (stored === null || !valid || stored.status !== 'active') throw new ServiceError('BAD_CREDENTIALS')
  await forgetLoginAttempt(ctx.db, attempt.id)
  const { password_hash: _hash, ...account } = stored
  return { token: ctx.tokens.issue(account), account }
}
