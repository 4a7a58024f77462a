/**
 * Whether a token without a credentials version (an external issuer's: it
 * carries only `iat`, in whole seconds) was issued after the account's last
 * deactivation, reactivation, password change or logout everywhere.
 *
 * - No such event yet: every token is accepted, with `iat` or without.
 * - A token without `iat` cannot show it came after the event: refused.
 * - A token issued in the same second as the event cannot be told apart
 *   from one issued just before it: refused (fail closed). The issuer's
 *   next token, a second later, is accepted.
 */
export function issuedAfterCredentialsChange(iat: unknown, changedAt: Date | null): boolean {
  if (changedAt === null) return true
  if (typeof iat !== 'number' || !Number.isFinite(iat)) return false
  return iat > Math.floor(changedAt.getTime() / 1000)
}
