import { randomBytes } from 'node:crypto'
import { passwordChangedEntry, passwordResetEntry, type AuditEntry } from '../domain/audit.js'
import { ServiceError } from '../domain/errors.js'
import type { LoginLimits } from '../domain/loginLimits.js'
import type { Account } from '../domain/principals.js'
import { findAccountByEmail, findAccountWithHash, setPassword } from '../storage/accounts.js'
import { admitLoginAttempt, clearLoginFailures } from '../storage/loginFailures.js'
import { actorOf, type Caller, type CommandContext } from './context.js'
import { AccountLoginLimitedError } from './login.js'

/**
 * Replaces the password, bumps the credentials version (older tokens are
 * refused), clears the account's login failures (guesses at a password that
 * no longer exists; this is how an operator lifts a lock-out) and audits it,
 * in one transaction. A `generated` password is marked to be changed by its
 * owner; one the owner chose clears the mark.
 */
async function replacePassword(ctx: CommandContext, account: Account, password: string, generated: boolean, audit: AuditEntry) {
  const passwordHash = await ctx.passwords.hash(password)
  return ctx.writes.run(async (tx) => {
    const updated = await setPassword(tx, account.id, passwordHash, new Date(ctx.clock.now()), generated)
    if (updated === null) throw new ServiceError('USER_NOT_FOUND')
    await clearLoginFailures(tx, account.email)
    return {
      changed: true,
      audit: [audit],
      changes: [{ kind: 'account' as const, account: updated }],
      result: updated,
    }
  })
}

/**
 * change-password: the caller's own, given its current one; every token
 * issued before is refused afterwards. The check of the current password is
 * a password guess like a login's, so it is counted and limited with the
 * account's login failures: a stolen token is not an unlimited oracle for
 * the password behind it.
 */
export async function changePassword(
  ctx: CommandContext,
  limits: LoginLimits,
  caller: Caller,
  current: string,
  next: string,
): Promise<{ revision: number; account: Account }> {
  const attempt = await admitLoginAttempt(ctx.db, caller.account.email, caller.ip, limits)
  if (!attempt.admitted) throw new AccountLoginLimitedError(attempt.retryAfterSeconds)
  const stored = await findAccountWithHash(ctx.db, caller.account.id)
  const valid = await ctx.passwords.verify(stored?.password_hash ?? null, current)
  if (stored === null || !valid) throw new ServiceError('CURRENT_PASSWORD_WRONG', {}, [{ field: 'current_password', message: 'invalid' }])
  const outcome = await replacePassword(ctx, stored, next, false, passwordChangedEntry(stored, actorOf(caller)))
  return { revision: outcome.revision, account: outcome.result }
}

/** `cli password reset`: a new random password for a locked-out admin, shown once and to be changed at the next sign-in; its old tokens are refused. */
export async function resetPassword(ctx: CommandContext, email: string): Promise<{ account: Account; password: string } | null> {
  const stored = await findAccountByEmail(ctx.db, email)
  if (stored === null) return null
  const password = randomBytes(18).toString('base64url')
  const outcome = await replacePassword(ctx, stored, password, true, passwordResetEntry(stored))
  return { account: outcome.result, password }
}
