/**
 * The original path forward auth decides on: every form an upstream could
 * read differently from the route map is refused with its reason, and plain
 * paths are decoded and matched as before.
 */
import t from 'tap'
import { normaliseOriginalPath } from '../../src/domain/originalPath.js'
import { RouteMap } from '../../src/domain/routeMap.js'
import { AMBIGUOUS_PATHS } from '../support/ambiguousPaths.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('a pure path rule')

const routeMap = new RouteMap([
  { method: 'GET', path: '/', obj: 'dashboard', act: 'read' },
  { method: 'GET', path: '/products/*', obj: 'products', act: 'read' },
  { method: 'GET', path: '/customers/:id', obj: 'customers', act: 'read' },
])

t.test('every ambiguous form is refused with its reason', async (t) => {
  for (const { path, reason } of AMBIGUOUS_PATHS) {
    t.same(normaliseOriginalPath(path), { ambiguous: reason }, JSON.stringify(path))
    // A query or another segment after the form changes nothing.
    if (path.startsWith('/')) t.same(normaliseOriginalPath(`${path}?page=2`), { ambiguous: reason }, `${JSON.stringify(path)} with a query`)
  }
})

t.test('percent-encodings of delimiters are refused in either case', async (t) => {
  const reasons = { '2f': 'encoded-slash', '5c': 'encoded-backslash', '2e': 'encoded-dot', '3b': 'encoded-semicolon' } as const
  for (const [hex, reason] of Object.entries(reasons)) {
    for (const escape of [`%${hex}`, `%${hex.toUpperCase()}`, `%${hex[0]}${(hex[1] as string).toUpperCase()}`]) {
      t.same(normaliseOriginalPath(`/products/a${escape}b`), { ambiguous: reason }, escape)
      t.same(normaliseOriginalPath(`/products/a%25${hex}b`), { ambiguous: 'double-encoding' }, `%25${hex}`)
    }
  }
})

t.test('plain paths are decoded segment by segment', async (t) => {
  const cases: Array<[string, string[]]> = [
    ['/', ['']],
    ['/products/1', ['products', '1']],
    ['/products/1/', ['products', '1']],
    ['/products/a/b/c', ['products', 'a', 'b', 'c']],
    ['/products/report.pdf', ['products', 'report.pdf']],
    ['/products/.hidden', ['products', '.hidden']],
    ['/products/a..b', ['products', 'a..b']],
    ['/products/caf%C3%A9', ['products', 'caf\u00e9']],
    ['/products/caf%c3%a9', ['products', 'caf\u00e9']],
    ['/products/100%25', ['products', '100%']],
    ['/products/a%20b', ['products', 'a b']],
    ['/products/a%3Fb', ['products', 'a?b']],
    ['/products/a+b:c@d', ['products', 'a+b:c@d']],
    // Dots and spaces that no upstream trims: inside a segment or in front of it.
    ['/products/v1.2/file.json', ['products', 'v1.2', 'file.json']],
    ['/.well-known/x', ['.well-known', 'x']],
    ['/products/caf%C3%A9.pdf', ['products', 'caf\u00e9.pdf']],
    ['/products/a%20.b', ['products', 'a .b']],
    ['/products/%E3%80%82', ['products', '\u3002']],
    // The query and the fragment are not the path, whatever they hold.
    ['/products/1?x=..;/%2e%5c\\', ['products', '1']],
    ['/products/1?next=/customers/1#/../x', ['products', '1']],
    ['/products/1#details', ['products', '1']],
    ['/products/1#details?x=/../../customers', ['products', '1']],
    ['/products/#top', ['products']],
    ['/#top', ['']],
  ]
  for (const [path, segments] of cases) t.same(normaliseOriginalPath(path), { segments }, path)
})

t.test('the route map matches normalised paths, and no ambiguous form reaches it', async (t) => {
  const match = (method: string, uri: string) => {
    const path = normaliseOriginalPath(uri)
    return 'ambiguous' in path ? path : routeMap.match(method, path.segments)
  }
  t.same(match('GET', '/products/1?expand=all'), { obj: 'products', act: 'read', domain: undefined })
  t.same(match('GET', '/products/a/b#top'), { obj: 'products', act: 'read', domain: undefined })
  t.same(match('get', '/customers/1/'), { obj: 'customers', act: 'read', domain: undefined })
  t.same(match('GET', '/customers/caf%C3%A9'), { obj: 'customers', act: 'read', domain: undefined })
  t.same(match('GET', '/'), { obj: 'dashboard', act: 'read', domain: undefined })
  t.equal(match('POST', '/products/1'), null, 'no entry for the method')
  t.equal(match('GET', '/customers/1/orders'), null, 'no entry for the path')
  for (const { path } of AMBIGUOUS_PATHS) t.ok('ambiguous' in (match('GET', path) ?? {}), `${JSON.stringify(path)} is never matched`)
})
