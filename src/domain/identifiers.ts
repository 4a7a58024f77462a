/**
 * What identifiers may look like. Nothing here can be read as syntax by
 * Casbin's matcher or by CSV-style policy files (no commas, quotes, spaces,
 * wildcards, NUL), and sub-role codes can never look like a user id (UUIDs
 * have hyphens), so the two never collide as Casbin subjects.
 */
export const SUB_ROLE_CODE_PATTERN = '^[a-z][a-z0-9_]{0,63}$'
/** A code create-sub-role accepts: a sub-role code of two characters or more. */
export const NEW_SUB_ROLE_CODE_PATTERN = '^[a-z][a-z0-9_]{1,63}$'
export const MERCHANT_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'
export const DOMAIN_PATTERN = MERCHANT_ID_PATTERN
export const PERMISSION_PART_PATTERN = '^[a-z][a-z0-9_.-]{0,63}$'
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'

/** `global` names the platform's own domain, so no merchant may take it, in any case. */
export function isReservedMerchantId(id: string): boolean {
  return id.toLowerCase() === 'global'
}
