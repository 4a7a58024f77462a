/**
 * The path of a proxied request as forward auth decides on it. The service
 * and the upstream behind the proxy must read the same path: if the upstream
 * strips `;…` from a segment (servlet containers), reads `\` as `/` (WHATWG
 * URL parsers), decodes twice, or resolves `..` that the route map took
 * literally, then `/api/products/..;/customers/1` is allowed as a product and
 * served as a customer. So the URI is normalised once, the way the strictest
 * upstream would read it, and anything two upstreams could read differently
 * is refused instead of matched.
 */

/** Why an original path is refused: each names a form some upstream reads differently from the route map. */
export type PathAmbiguity =
  | 'not-absolute'
  | 'control-character'
  | 'space'
  | 'non-ascii'
  | 'backslash'
  | 'semicolon'
  | 'invalid-escape'
  | 'encoded-slash'
  | 'encoded-backslash'
  | 'encoded-dot'
  | 'encoded-semicolon'
  | 'double-encoding'
  | 'compatibility-form'
  | 'dot-segment'
  | 'padded-segment'
  | 'invisible-character'
  | 'empty-segment'
  | 'fragment-path'
  | 'alternate-stream'

/** The decoded segments of an unambiguous path (`/` is `['']`; a trailing slash is dropped), or why it is refused. */
export type OriginalPath = { segments: string[] } | { ambiguous: PathAmbiguity }

const HEX = /^[0-9A-Fa-f]{2}$/
/** An escape left after decoding once: an upstream that decodes again reads another character. */
const ESCAPE = /%[0-9A-Fa-f]{2}/
const NON_ASCII = /[\u0080-\uffff]/
/**
 * Whitespace other than the ASCII space (which is matched where a segment
 * holds it inside), and format characters (zero-width ones, the byte order
 * mark): upstreams trim them (.NET's `Trim`), fold them to a space (NFKC),
 * or drop them.
 */
const INVISIBLE = /[^\S ]|\p{Cf}/u
/** The delimiters and whitespace of a segment, in order: what Unicode compatibility folding (NFKC) must leave as it is. */
const DELIMITERS = /[./\\;:%?#\s]/gu
const WHITESPACE = /\s/u
/**
 * NTFS's alternate data streams: Windows upstreams read `customers::$DATA`
 * and `customers:x:$DATA` as the file `customers`.
 */
const ALTERNATE_STREAM = /:\$|:[^:]*:\$/

const ENCODED_DELIMITERS: Readonly<Record<string, PathAmbiguity>> = { '2F': 'encoded-slash', '5C': 'encoded-backslash', '2E': 'encoded-dot', '3B': 'encoded-semicolon' }

/**
 * The original URI's path (before `?` and `#`) as decoded segments, or the
 * first reason it is ambiguous: a `;`, a backslash, an encoded `/`, `\`, `.`
 * or `;`, a dot or empty segment (also once trailing dots and whitespace are
 * trimmed), a segment ending in a dot or whitespace or starting with
 * whitespace, a control character, raw space or raw non-ASCII byte, Unicode
 * whitespace or a format character, a broken or double percent-encoding, a
 * segment whose delimiters Unicode folding changes, or a fragment that a
 * reader unaware of fragments would take for more path, or an NTFS
 * alternate data stream (`::$DATA`). Each segment is
 * judged as sent and as decoded.
 */
export function normaliseOriginalPath(uri: string): OriginalPath {
  const queryAt = uri.indexOf('?')
  // As a reader unaware of fragments sees it: `#…` is part of the last segment.
  const literal = queryAt === -1 ? uri : uri.slice(0, queryAt)
  if (!literal.startsWith('/')) return { ambiguous: 'not-absolute' }
  const fragmentAt = literal.indexOf('#')
  if (fragmentAt !== -1 && literal.includes('/', fragmentAt)) return { ambiguous: 'fragment-path' }
  const raw = literal.split('/')
  const segments: string[] = []
  for (let i = 1; i < raw.length; i++) {
    const segment = readSegment(raw[i] as string)
    if (typeof segment !== 'string') return segment
    if (segment !== '') segments.push(segment)
    // `//` is one segment to upstreams that merge slashes and two to the others; a trailing slash is the same resource.
    else if (i < raw.length - 1) return { ambiguous: 'empty-segment' }
  }
  return { segments: segments.length === 0 ? [''] : segments }
}

/** One raw segment decoded, without a fragment, or the first ambiguity in it. */
function readSegment(text: string): string | { ambiguous: PathAmbiguity } {
  let escaped = false
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x20 || code === 0x7f) return { ambiguous: 'control-character' }
    if (code === 0x20) return { ambiguous: 'space' }
    if (code > 0x7f) return { ambiguous: 'non-ascii' }
    if (code === 0x5c) return { ambiguous: 'backslash' }
    if (code === 0x3b) return { ambiguous: 'semicolon' }
    if (code === 0x25) {
      const hex = text.slice(i + 1, i + 3)
      if (!HEX.test(hex)) return { ambiguous: 'invalid-escape' }
      const delimiter = ENCODED_DELIMITERS[hex.toUpperCase()]
      if (delimiter !== undefined) return { ambiguous: delimiter }
      escaped = true
    }
  }
  // Judged with its fragment too (above), matched without it.
  const hashAt = text.indexOf('#')
  const path = hashAt === -1 ? text : text.slice(0, hashAt)
  // Decoding keeps a trailing dot trailing: the decoded form is judged for both (below) when there is anything to decode.
  if (!escaped) {
    const padded = trimmed(path)
    if (padded !== null) return { ambiguous: padded }
    return ALTERNATE_STREAM.test(path) ? { ambiguous: 'alternate-stream' } : path
  }
  let decoded: string
  try {
    decoded = decodeURIComponent(text)
  } catch {
    // Not UTF-8 (or an overlong form): upstreams differ on what such bytes mean.
    return { ambiguous: 'invalid-escape' }
  }
  for (let i = 0; i < decoded.length; i++) {
    const code = decoded.charCodeAt(i)
    // C0, DEL and C1 (U+0085 is a line break to .NET).
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return { ambiguous: 'control-character' }
  }
  if (ESCAPE.test(decoded)) return { ambiguous: 'double-encoding' }
  if (INVISIBLE.test(decoded)) return { ambiguous: 'invisible-character' }
  const segment = hashAt === -1 ? decoded : decodeURIComponent(path)
  const padded = trimmed(segment)
  if (padded !== null) return { ambiguous: padded }
  if (ALTERNATE_STREAM.test(segment)) return { ambiguous: 'alternate-stream' }
  if (NON_ASCII.test(segment) && foldsDelimiters(segment)) return { ambiguous: 'compatibility-form' }
  return segment
}

/**
 * How a segment reads to an upstream that trims it (Windows and IIS drop
 * trailing dots and spaces, .NET trims whitespace at both ends): null when
 * it reads as it is; `dot-segment` when only dots are left (`..%20` is
 * `..`), `empty-segment` when nothing is, `padded-segment` otherwise
 * (`customers.` is `customers`). Dots inside (`v1.2`, `a..b`) or in front
 * (`.well-known`) are trimmed by no one.
 */
function trimmed(segment: string): PathAmbiguity | null {
  let end = segment.length
  while (end > 0 && (segment[end - 1] === '.' || WHITESPACE.test(segment[end - 1] as string))) end--
  let start = 0
  while (start < end && WHITESPACE.test(segment[start] as string)) start++
  if (start === 0 && end === segment.length) return null
  if (start < end) return 'padded-segment'
  return segment.includes('.') ? 'dot-segment' : 'empty-segment'
}

/** Whether NFKC folding adds, removes or changes a delimiter or a space (a fullwidth `．`, `…`, `⁄`). */
function foldsDelimiters(segment: string): boolean {
  const delimiters = (text: string): string => text.match(DELIMITERS)?.join('') ?? ''
  return delimiters(segment.normalize('NFKC')) !== delimiters(segment)
}
