/**
 * What the console takes from the address bar (console/routes.js): a screen's
 * id is read only when it matches the API's own pattern, and every value put
 * in an API path is encoded as one segment, so no address can make the
 * browser resolve `..` or `\` into another API route.
 */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { MERCHANT_ID_PATTERN, SUB_ROLE_CODE_PATTERN, UUID_PATTERN } from '../../src/domain/identifiers.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { repositoryRoot } from '../support/serverProcess.js'

onceOnPGlite('a browser module without a database')

interface Routes {
  USER_ID: RegExp
  SUB_ROLE_CODE: RegExp
  MERCHANT_ID: RegExp
  readRoute: (hash: string) => { section: string | null; id: string | null }
  apiPath: (strings: TemplateStringsArray, ...values: unknown[]) => string
}

// A browser script without types: loaded by its file URL.
const routes = (await import(pathToFileURL(join(repositoryRoot, 'console', 'routes.js')).href)) as Routes
const USER = '3f0c4b7e-9a3b-4c7e-9d2a-1b2c3d4e5f60'

t.test("the console's patterns are the API's", async (t) => {
  t.equal(routes.USER_ID.source, UUID_PATTERN)
  t.equal(routes.SUB_ROLE_CODE.source, SUB_ROLE_CODE_PATTERN)
  t.equal(routes.MERCHANT_ID.source, MERCHANT_ID_PATTERN)
})

t.test('a route id is read only when it matches its pattern', async (t) => {
  t.same(routes.readRoute(''), { section: null, id: null })
  t.same(routes.readRoute('#/accounts'), { section: 'accounts', id: null })
  t.same(routes.readRoute(`#/users/${USER}`), { section: 'users', id: USER })
  t.same(routes.readRoute(`#users/${USER}/`), { section: 'users', id: USER }, 'without the leading slash, with a trailing one')
  for (const id of [
    '..\\..\\..\\v2\\admin\\permissions\\holders?obj=orders&act=read',
    '..',
    '%2e%2e',
    `${USER}?x=1`,
    `${USER}%2f..`,
    `${USER}#x`,
    ` ${USER}`,
    `${USER.slice(0, -1)}`,
  ]) {
    t.same(routes.readRoute(`#/users/${id}`), { section: 'users', id: null }, JSON.stringify(id))
  }
  t.same(routes.readRoute(`#/users/${USER}/../../v2`), { section: 'users', id: null }, 'more segments after the id')
  t.same(routes.readRoute(`#/shadow/${USER}`), { section: 'shadow', id: null }, 'a section that takes no id')
  for (const section of ['constructor', '__proto__', 'toString']) t.same(routes.readRoute(`#/${section}/x`), { section, id: null }, `${section} is no section's pattern`)
  t.same(routes.readRoute('#/accounts/shop-a'), { section: 'accounts', id: 'shop-a' }, "a merchant's accounts")
  for (const id of ['..', '.hidden', '-x', 'a/b', '..\\v2', 'x'.repeat(65)]) t.same(routes.readRoute(`#/accounts/${id}`), { section: 'accounts', id: null }, `merchant ${JSON.stringify(id)}`)
})

t.test('values in an API path are encoded as one segment each', async (t) => {
  const { apiPath } = routes
  t.equal(apiPath`/v2/admin/accounts/${USER}/sub-role`, `/v2/admin/accounts/${USER}/sub-role`)
  t.equal(apiPath`/v2/admin/accounts/${'a/b?c#d\\e%f g'}`, '/v2/admin/accounts/a%2Fb%3Fc%23d%5Ce%25f%20g')
  t.equal(apiPath`/v2/admin/permissions/roles/${'clerk'}/${'grant'}`, '/v2/admin/permissions/roles/clerk/grant')
  for (const value of ['', '.', '..']) t.throws(() => apiPath`/v2/admin/accounts/${value}`, { message: /not a path segment/ }, JSON.stringify(value))
  t.equal(apiPath`/v2/admin/accounts/${'...'}`, '/v2/admin/accounts/...', 'three dots are no dot segment to a browser')
})
