import { isDomainName } from './identifiers.js'
import { normaliseOriginalPath, type PathAmbiguity } from './originalPath.js'

/**
 * The gateway's route map: which permission an upstream request needs, so a
 * proxy can ask the forward-auth endpoint without knowing the catalog. An
 * entry is `{method, path, obj, act, domain?}`; the path is matched segment
 * by segment, `:name` matching any one segment and `*` any one segment, or,
 * as the last segment, whatever follows. The first entry that matches wins;
 * a request matching none is denied. `domain` is a literal or `:name` of a
 * path parameter (e.g. the merchant in `/merchants/:merchant/orders`).
 * Requests are matched on their normalised path (originalPath.ts), never on
 * the raw URI.
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

export class RouteMap {
  private readonly routes: CompiledRoute[]

  constructor(entries: readonly RouteMapEntry[]) {
    this.routes = entries.map((entry, i) => compile(entry, i + 1))
  }

  get size(): number {
    return this.routes.length
  }

  /**
   * The permission the original request needs, or null (deny). `segments`
   * is the path as `normaliseOriginalPath` reads it: decoded, and refused
   * beforehand when two upstreams could read it differently.
   */
  match(method: string, segments: readonly string[]): RoutePermission | null {
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

/** What forward auth decides on: a pair, an original path refused as ambiguous, or nothing (deny). */
export type ForwardAuthAsk = RoutePermission | { ambiguous: PathAmbiguity } | null

/**
 * The route map's pair for an original request, or null (deny) when none
 * matches or its domain is malformed. The URI is normalised first, and a path
 * an upstream could read differently is refused rather than matched. Verify
 * and gRPC's ext_authz both ask this.
 */
export function mappedPair(routeMap: RouteMap | null, method: string, uri: string): ForwardAuthAsk {
  const path = normaliseOriginalPath(uri)
  if ('ambiguous' in path) return path
  const matched = routeMap?.match(method, path.segments) ?? null
  if (matched === null || (matched.domain !== undefined && !isDomainName(matched.domain))) return null
  return matched
}
