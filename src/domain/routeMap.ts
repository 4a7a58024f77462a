/**
 * The gateway's route map: which permission an upstream request needs, so a
 * proxy can ask the forward-auth endpoint without knowing the catalog. An
 * entry is `{method, path, obj, act, domain?}`; the path is matched segment
 * by segment, `:name` matching any one segment and `*` any one segment, or,
 * as the last segment, whatever follows. The first entry that matches wins;
 * a request matching none is denied. `domain` is a literal or `:name` of a
 * path parameter (e.g. the merchant in `/merchants/:merchant/orders`).
 */
export interface RouteMapEntry {
  method: string
  path: string
  obj: string
  act: string
  domain?: string
}

export interface RoutePermission {
  obj: string
  act: string
  domain: string | undefined
}

type Segment = { kind: 'literal'; text: string } | { kind: 'param'; name: string } | { kind: 'one' } | { kind: 'rest' }

interface CompiledRoute {
  method: string | null
  segments: Segment[]
  obj: string
  act: string
  domain: { literal: string } | { param: string } | null
}

export class RouteMapError extends Error {
  override name = 'RouteMapError'
}

function segmentsOf(path: string): string[] {
  return path.split('/').slice(1)
}

function compile(entry: RouteMapEntry, position: number): CompiledRoute {
  if (!entry.path.startsWith('/')) throw new RouteMapError(`entry ${position}: path must start with /`)
  const raw = segmentsOf(entry.path)
  const segments = raw.map((text, i): Segment => {
    if (text === '*') return i === raw.length - 1 ? { kind: 'rest' } : { kind: 'one' }
    if (text.startsWith(':') && text.length > 1) return { kind: 'param', name: text.slice(1) }
    return { kind: 'literal', text }
  })
  const params = new Set(segments.flatMap((s) => (s.kind === 'param' ? [s.name] : [])))
  let domain: CompiledRoute['domain'] = null
  if (entry.domain !== undefined) {
    if (entry.domain.startsWith(':')) {
      const param = entry.domain.slice(1)
      if (!params.has(param)) throw new RouteMapError(`entry ${position}: domain ${entry.domain} names no parameter of ${entry.path}`)
      domain = { param }
    } else {
      domain = { literal: entry.domain }
    }
  }
  return { method: entry.method === '*' ? null : entry.method.toUpperCase(), segments, obj: entry.obj, act: entry.act, domain }
}

/** Dot segments and empty segments are refused outright: `/a/../admin` must never match `/a/*`. */
function unsafe(segment: string): boolean {
  return segment === '' || segment === '.' || segment === '..'
}

export class RouteMap {
  private readonly routes: CompiledRoute[]

  constructor(entries: readonly RouteMapEntry[]) {
    this.routes = entries.map((entry, i) => compile(entry, i + 1))
  }

  get size(): number {
    return this.routes.length
  }

  /**
   * The permission the original request needs, or null (deny). The URI's
   * query string is ignored; segments are compared after percent-decoding, and
   * a URI that cannot be decoded, or holds dot or empty segments, or an
   * encoded slash, matches nothing.
   */
  match(method: string, uri: string): RoutePermission | null {
    const path = uri.split('?', 1)[0] ?? ''
    if (!path.startsWith('/')) return null
    let segments: string[]
    try {
      segments = segmentsOf(path).map((s) => {
        const decoded = decodeURIComponent(s)
        if (decoded.includes('/') || decoded.includes('\u0000')) throw new RouteMapError('encoded slash')
        return decoded
      })
    } catch {
      return null
    }
    // A trailing slash is the same resource; anything else odd is refused.
    if (segments.length > 1 && segments[segments.length - 1] === '') segments.pop()
    if (segments.some(unsafe) && !(segments.length === 1 && segments[0] === '')) return null
    const upper = method.toUpperCase()
    for (const route of this.routes) {
      if (route.method !== null && route.method !== upper) continue
      const params = matchSegments(route.segments, segments)
      if (params === null) continue
      const domain = route.domain === null ? undefined : 'literal' in route.domain ? route.domain.literal : params.get(route.domain.param)
      return { obj: route.obj, act: route.act, domain }
    }
    return null
  }
}

function matchSegments(pattern: readonly Segment[], segments: readonly string[]): Map<string, string> | null {
  const params = new Map<string, string>()
  for (let i = 0; i < pattern.length; i++) {
    const want = pattern[i] as Segment
    if (want.kind === 'rest') return params
    const got = segments[i]
    if (got === undefined) return null
    if (want.kind === 'literal' && want.text !== got) return null
    if (want.kind === 'param') params.set(want.name, got)
  }
  return pattern.length === segments.length ? params : null
}
