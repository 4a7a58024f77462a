import { GLOBAL_DOMAIN } from './principals.js'

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

const DOMAIN = new RegExp(DOMAIN_PATTERN)
const PERMISSION_PART = new RegExp(PERMISSION_PART_PATTERN)

/** Whether `text` may name a domain (DOMAIN_PATTERN): `global` or a merchant id. */
export const isDomainName = (text: string): boolean => DOMAIN.test(text)

/** Whether `text` may be a permission's obj or act (PERMISSION_PART_PATTERN). */
export const isPermissionPart = (text: string): boolean => PERMISSION_PART.test(text)

/** A pattern `^[first][rest]{0,n}$` as byte tables, for code that reads bytes rather than strings. */
export interface IdentifierBytes {
  /** 1 for each byte a value may start with. */
  first: Uint8Array
  /** 1 for each byte that may follow. */
  rest: Uint8Array
  /** The longest value, in bytes. */
  maxLength: number
}

/**
 * The byte tables of an identifier pattern, read from the pattern itself
 * (each ASCII byte tried alone and after a valid first one, the length
 * tried upwards), so the bytes accepted can never differ from the strings.
 */
export function identifierBytes(pattern: string): IdentifierBytes {
  const re = new RegExp(pattern)
  const first = new Uint8Array(256)
  const rest = new Uint8Array(256)
  for (let c = 0; c < 128; c++) first[c] = re.test(String.fromCharCode(c)) ? 1 : 0
  const start = first.indexOf(1)
  if (start < 0) throw new Error(`${pattern} matches no one-character value`)
  const lead = String.fromCharCode(start)
  for (let c = 0; c < 128; c++) rest[c] = re.test(lead + String.fromCharCode(c)) ? 1 : 0
  if (rest[start] !== 1) throw new Error(`${pattern}: its first character cannot repeat, so its length cannot be read`)
  let maxLength = 1
  while (maxLength < 4096 && re.test(lead.repeat(maxLength + 1))) maxLength++
  return { first, rest, maxLength }
}

/** `global` names the platform's own domain, so no merchant may take it, in any case. */
export function isReservedMerchantId(id: string): boolean {
  return id.toLowerCase() === GLOBAL_DOMAIN
}
