import { ServiceError } from './errors.js'
import { isReservedMerchantId } from './identifiers.js'
import { ROOT_SUB_ROLE, type Account, type PrincipalType } from './principals.js'

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
 * none. `super_admin` is never registered (one exists per merchant and system).
 */
export function placeNewAdmin(caller: Pick<Account, 'principal_type' | 'merchant_id'>, request: RegistrationRequest): RegistrationPlacement {
  if (request.sub_role_code === ROOT_SUB_ROLE) throw new ServiceError('ROOT_ROLE_NOT_REGISTRABLE')
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
