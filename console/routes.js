// What the address bar may name, checked before anything from it reaches an
// API path: `#/users/..\..\v2\admin\permissions\holders` would otherwise have
// the browser resolve the backslashes and dots and send that request with the
// admin's token. The patterns are the API's own (src/domain/identifiers.ts;
// test/console/routes.test.ts keeps them equal).
export const USER_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/
export const SUB_ROLE_CODE = /^[a-z][a-z0-9_]{0,63}$/
export const MERCHANT_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

/** The id pattern of each screen that takes one from the address bar: a user's, or the merchant whose accounts are listed. */
const ROUTE_IDS = { users: USER_ID, accounts: MERCHANT_ID }

/**
 * `#/users/<id>` → `{ section: 'users', id }`, `#/accounts/<merchant id>` →
 * `{ section: 'accounts', id }`; `id` is null when the section
 * takes none or the address bar's does not match its pattern.
 */
export function readRoute(hash) {
  const [section = null, id = null, ...rest] = hash.replace(/^#\/?/, '').split('/').filter((s) => s !== '')
  const pattern = section !== null && Object.hasOwn(ROUTE_IDS, section) ? ROUTE_IDS[section] : undefined
  return { section, id: pattern !== undefined && id !== null && rest.length === 0 && pattern.test(id) ? id : null }
}

/**
 * An API path with every value put in it encoded as one segment:
 * apiPath`/v2/admin/accounts/${id}/sub-role`. A value that would still be read
 * as a dot segment or no segment at all is refused.
 */
export function apiPath(strings, ...values) {
  return strings.reduce((path, text, i) => {
    if (i === 0) return text
    const value = String(values[i - 1])
    if (value === '' || value === '.' || value === '..') throw new Error(`not a path segment: ${JSON.stringify(value)}`)
    return `${path}${encodeURIComponent(value)}${text}`
  }, '')
}
