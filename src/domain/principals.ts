/** Who callers and accounts are, and which domain each belongs to. */
export const PRINCIPAL_TYPES = ['system_owner', 'merchant'] as const
export type PrincipalType = (typeof PRINCIPAL_TYPES)[number]

/** The domain of platform-wide grants; no merchant may take this id. */
export const GLOBAL_DOMAIN = 'global'

export const ACCOUNT_STATUSES = ['active', 'deactivated'] as const
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number]

export interface Account {
  id: string
  email: string
  name: string
  phone: string | null
  principal_type: PrincipalType
  merchant_id: string | null
  sub_role_code: string
  parent_role: PrincipalType | null
  created_by: string | null
  created_at: Date
  /** A deactivated account's tokens are refused, its login fails and checks about it answer false. */
  status: AccountStatus
  /** Bumped by a password change or reset: tokens issued under an older version are refused. */
  credentials_version: number
  /** Its password was generated (first start, `cli password reset`): the console asks for a new one before anything else. */
  must_change_password: boolean
  /**
   * When the account was last deactivated, reactivated, given a new password
   * or logged out everywhere (null: never). Tokens from an external issuer
   * carry no credentials version: their issue time is compared with this.
   */
  credentials_changed_at: Date | null
}

/** A user's home domain: its merchant id, or `global` for system-owner users. */
export function homeDomain(account: Pick<Account, 'principal_type' | 'merchant_id'>): string {
  return account.principal_type === 'merchant' && account.merchant_id !== null ? account.merchant_id : GLOBAL_DOMAIN
}

/** Whether `caller` may see or manage `target` at all (tenant isolation). */
export function canReachAccount(
  caller: Pick<Account, 'principal_type' | 'merchant_id'>,
  target: Pick<Account, 'principal_type' | 'merchant_id'>,
): boolean {
  if (caller.principal_type === 'system_owner') return true
  return target.principal_type === 'merchant' && target.merchant_id === caller.merchant_id
}
