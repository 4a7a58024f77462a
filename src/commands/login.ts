import { ServiceError } from '../domain/errors.js'
import type { LoginLimits } from '../domain/loginLimits.js'
import type { Account } from '../domain/principals.js'
import type { PasswordHasher } from '../security/passwords.js'
import type { IssuedToken, TokenIssuer } from '../security/tokens.js'
import { findAccountByEmail } from '../storage/accounts.js'
import type { Database } from '../storage/db.js'
import { admitLoginAttempt, recordLoginSuccess } from '../storage/loginFailures.js'

export interface LoginContext {
  db: Database
  passwords: PasswordHasher
  tokens: TokenIssuer | null
  /** Failed password checks per account and address, and per account, before its login is refused unchecked. */
  limits: LoginLimits
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
 * argon2 verify each), and both count against the e-mail's limits, so
 * neither the 401 nor the 429 tells whether an account exists. A limited
 * e-mail is refused from that address before any look-up or hash work,
 * whatever the password; other addresses are not (src/domain/loginLimits.ts).
 *
 * A success does not clear earlier failures: they were guesses, and clearing
 * them would give a guesser a fresh budget every time the owner (or a script
 * using the account) logs in, so the bound would be per owner login rather
 * than per window. The owner's cost is that typos before a success still
 * count until they leave the window.
 */
export async function login(ctx: LoginContext, email: string, password: string, ip: string | null): Promise<{ token: IssuedToken; account: Account }> {
  if (ctx.tokens === null) throw new ServiceError('LOGIN_UNAVAILABLE')
  const attempt = await admitLoginAttempt(ctx.db, email, ip, ctx.limits)
  if (!attempt.admitted) throw new AccountLoginLimitedError(attempt.retryAfterSeconds)
  const stored = await findAccountByEmail(ctx.db, email)
  const valid = await ctx.passwords.verify(stored?.password_hash ?? null, password)
  // A deactivated account's login fails exactly like a wrong password (after the same hash work).
  if (stored === null || !valid || stored.status !== 'active') throw new ServiceError('BAD_CREDENTIALS')
  await recordLoginSuccess(ctx.db, attempt.id, email, ip)
  const { password_hash: _hash, ...account } = stored
  return { token: ctx.tokens.issue(account), account }
}
