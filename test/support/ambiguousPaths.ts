/**
 * Original paths that the route map would read as a product (`/products/*`),
 * or as a path it does not map, while some upstream reads them as a customer
 * or as something else, each with the reason forward auth gives for refusing
 * it. Paths are relative to
 * the application's root: the gateway test puts `/api` in front.
 */
import type { PathAmbiguity } from '../../src/domain/originalPath.js'

export interface AmbiguousPath {
  path: string
  reason: PathAmbiguity
  /** Sendable as an HTTP request target (no raw control character, space or non-ASCII byte). */
  requestLine: boolean
  /** Sendable as a header value (no raw NUL, CR or LF). */
  header: boolean
}

const line = (path: string, reason: PathAmbiguity): AmbiguousPath => ({ path, reason, requestLine: true, header: true })
const headerOnly = (path: string, reason: PathAmbiguity): AmbiguousPath => ({ path, reason, requestLine: false, header: true })
const neither = (path: string, reason: PathAmbiguity): AmbiguousPath => ({ path, reason, requestLine: false, header: false })

/** The route map these paths are asked against: a user may read products, not customers. */
export const AMBIGUOUS_PATH_ROUTES = [
  { method: 'GET', path: '/products/*', obj: 'products', act: 'read' },
  { method: 'GET', path: '/customers/:id', obj: 'customers', act: 'read' },
]

export const AMBIGUOUS_PATHS: readonly AmbiguousPath[] = [
  // Servlet containers drop `;…` from a segment, then resolve what is left.
  line('/products/..;/customers/1', 'semicolon'),
  line('/products/..;jsessionid=x/customers/1', 'semicolon'),
  line('/products/x;a=b/../../customers/1', 'semicolon'),
  line('/products/..%3B/customers/1', 'encoded-semicolon'),
  line('/products/..%3b/customers/1', 'encoded-semicolon'),
  // WHATWG URL parsers read `\` as `/`.
  line('/products/..\\customers\\1', 'backslash'),
  line('/products/..%5Ccustomers%5C1', 'encoded-backslash'),
  line('/products/..%5ccustomers%5c1', 'encoded-backslash'),
  // Encoded slashes and dots: some upstreams decode before routing.
  line('/products/..%2Fcustomers%2F1', 'encoded-slash'),
  line('/products/..%2fcustomers%2f1', 'encoded-slash'),
  line('/products/%2E%2E/customers/1', 'encoded-dot'),
  line('/products/%2e%2e/customers/1', 'encoded-dot'),
  line('/products/.%2e/customers/1', 'encoded-dot'),
  line('/products/report%2Epdf', 'encoded-dot'),
  // Decoded twice.
  line('/products/%252e%252e/customers/1', 'double-encoding'),
  line('/products/%252E%252E/customers/1', 'double-encoding'),
  line('/products/..%255ccustomers', 'double-encoding'),
  line('/products/..%252fcustomers%252f1', 'double-encoding'),
  line('/products/%25%32%65%25%32%65/customers/1', 'double-encoding'),
  // Dot segments, resolved by nearly every upstream; `...` by those that trim trailing dots.
  line('/products/x/../../customers/1', 'dot-segment'),
  line('/products/../customers/1', 'dot-segment'),
  line('/products/./1', 'dot-segment'),
  line('/products/.../customers/1', 'dot-segment'),
  // Trailing spaces, tabs and dots, which Windows servers (IIS) trim from a segment: `..%20` is `..` to them.
  line('/products/..%20/customers/1', 'dot-segment'),
  line('/products/.%20/customers/1', 'dot-segment'),
  line('/products/..%20%20/customers/1', 'dot-segment'),
  line('/products/.%20./customers/1', 'dot-segment'),
  line('/products/%20../customers/1', 'dot-segment'),
  line('/products/..%09/customers/1', 'control-character'),
  line('/products/..%0b/customers/1', 'control-character'),
  line('/products/..%0c/customers/1', 'control-character'),
  line('/products/x/..../../customers/1', 'dot-segment'),
  line('/customers./1', 'padded-segment'),
  line('/customers../1', 'padded-segment'),
  line('/customers%20/1', 'padded-segment'),
  line('/customers.%20/1', 'padded-segment'),
  line('/products/1.', 'padded-segment'),
  line('/products/%20customers', 'padded-segment'),
  line('/products/report.pdf%20', 'padded-segment'),
  line('/products/%20', 'empty-segment'),
  // Judged without its fragment, as it is matched.
  headerOnly('/products/1.#top', 'padded-segment'),
  headerOnly('/products/1%20#top', 'padded-segment'),
  line('/products/%20/customers/1', 'empty-segment'),
  // Unicode whitespace and format characters, which .NET trims, NFKC folds to a space, or upstreams drop.
  line('/products/..%C2%A0/customers/1', 'invisible-character'),
  line('/products/..%E3%80%80/customers/1', 'invisible-character'),
  line('/products/.%E2%80%8B./customers/1', 'invisible-character'),
  line('/products/..%EF%BB%BF/customers/1', 'invisible-character'),
  line('/products/..%C2%85/customers/1', 'control-character'),
  // Empty segments: merged by some upstreams, kept by others.
  line('/products//../customers/1', 'empty-segment'),
  line('/products//1', 'empty-segment'),
  line('//customers/1', 'empty-segment'),
  // Broken or non-UTF-8 escapes (an overlong `.` among them).
  line('/products/%zz', 'invalid-escape'),
  line('/products/%E0%A4%A', 'invalid-escape'),
  line('/products/%', 'invalid-escape'),
  line('/products/%C0%AE%C0%AE/customers/1', 'invalid-escape'),
  // Control characters, decoded or raw (WHATWG parsers drop a tab).
  line('/products/%00/../../customers/1', 'control-character'),
  line('/products/x%0a', 'control-character'),
  headerOnly('/products/.\t./customers/1', 'control-character'),
  neither('/products/x\u0000/../../customers/1', 'control-character'),
  headerOnly('/products/x /../../customers/1', 'space'),
  headerOnly('/products/caf\u00e9', 'non-ascii'),
  // Unicode compatibility folding (NFKC) turns a fullwidth `.` or `/` into the real one.
  line('/products/%EF%BC%8E%EF%BC%8E/customers/1', 'compatibility-form'),
  line('/products/x%EF%BC%8F..%EF%BC%8Fcustomers', 'compatibility-form'),
  line('/products/..%EF%BC%8E/customers/1', 'compatibility-form'),
  line('/products/%E2%80%A5/customers/1', 'compatibility-form'),
  line('/products/%E2%80%A6/customers/1', 'compatibility-form'),
  line('/customers%EF%BC%8E/1', 'compatibility-form'),
  // IIS's own `%u` escapes.
  line('/products/%u002e%u002e/customers/1', 'invalid-escape'),
  line('/products/..%u0020/customers/1', 'invalid-escape'),
  // A fragment that a reader unaware of fragments takes for more path.
  line('/products/x#/../../customers/1', 'fragment-path'),
  // Windows upstreams read an NTFS stream name as the file it belongs to.
  line('/products/1::$DATA', 'alternate-stream'),
  line('/products/1::$data', 'alternate-stream'),
  line('/products/1:secret:$DATA', 'alternate-stream'),
  line('/products/1%3A%3A%24DATA', 'alternate-stream'),
  line('/products/x:$I30:$INDEX_ALLOCATION', 'alternate-stream'),
  headerOnly('products/1', 'not-absolute'),
  headerOnly('http://upstream/customers/1', 'not-absolute'),
]
