import { loggedOutEntry, loggedOutEverywhereEntry } from '../domain/audit.js'
import { ServiceError } from '../domain/errors.js'
import { deleteExpiredEndedTokens, insertEndedToken } from '../storage/endedTokens.js'
import { endAllTokens } from '../storage/accounts.js'
import { actorOf, type Caller, type CommandContext } from './context.js'

/** The token a logout ends: its id (null when its issuer gave it none) and its expiry (epoch milliseconds). */
export interface PresentedToken {
  jti: string | null
  expiresAt: number
}

/**
 * logout: ends the caller's token, or every token of the account
 * (`everywhere`), on every replica through the change feed.
 *
 * One token is remembered by its `jti` until it would have expired; the
 * rows of tokens already expired are forgotten in the same transaction.
 * Every token of the account is ended by moving its credentials (the
 * version our tokens carry, and the instant an external issuer's `iat` is
 * compared with), so nothing is remembered per token. A token without a
 * `jti` cannot be told apart from the account's other tokens: its logout
 * ends them all.
 */
export async function logout(ctx: CommandContext, caller: Caller, token: PresentedToken, everywhere: boolean): Promise<{ revision: number }> {
  const account = caller.account
  const now = new Date(ctx.clock.now())
  const jti = token.jti
  if (everywhere || jti === null) {
    const outcome = await ctx.writes.run(async (tx) => {
      const updated = await endAllTokens(tx, account.id, now)
      if (updated === null) throw new ServiceError('INVALID_TOKEN')
      return {
        changed: true,
        audit: [loggedOutEverywhereEntry(account, actorOf(caller))],
        changes: [{ kind: 'account' as const, account: updated }],
        result: null,
      }
    })
    return { revision: outcome.revision }
  }
  const outcome = await ctx.writes.run(async (tx) => {
    await deleteExpiredEndedTokens(tx, now)
    await insertEndedToken(tx, jti, account.id, new Date(token.expiresAt))
    return {
      changed: true,
      audit: [loggedOutEntry(account, actorOf(caller))],
      changes: [{ kind: 'token_ended' as const, account_id: account.id, jti, expires_at: new Date(token.expiresAt).toISOString() }],
      result: null,
    }
  })
  return { revision: outcome.revision }
}
