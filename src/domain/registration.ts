import { ServiceError } from './errors.js'
import { isReservedMerchantId } from './identifiers.js'
import type { Account, PrincipalType } from './principals.js'
import { isRootSubRole, type RootRoles } from './root.js'

export interface RegistrationRequest {
  sub_role_code: string
  merchant_id?: string | undefined
}

export interface RegistrationPlacement {
  principal_type: PrincipalType
  merchant_id: string | null
  parent_role: PrincipalType
}

/**
 * Where a new administrator goes: a merchant caller always registers into its
 * own merchant, whatever the body says; a system owner may pick a merchant or
 * none. A root sub-role is never registered (bootstrap and onboarding give
 * it, one per merchant and system).
 */
export function placeNewAdmin(
  caller: Pick<Account, 'principal_type' | 'merchant_id'>,
  request: RegistrationRequest,
  roots: RootRoles,
): RegistrationPlacement {
  if (isRootSubRole(roots, request.sub_role_code)) throw new ServiceError('ROOT_ROLE_NOT_REGISTRABLE')
  const merchantId = caller.principal_type === 'merchant' ? caller.merchant_id : (request.merchant_id ?? null)
  if (merchantId !== null && isReservedMerchantId(merchantId)) {
    throw new ServiceError('VALIDATION_FAILED', {}, [{ field: 'merchant_id', message: 'reserved' }])
  }
  return {
    principal_type: merchantId === null ? 'system_owner' : 'merchant',
    merchant_id: merchantId,
    parent_role: caller.principal_type,
  }
}
