import { GLOBAL_DOMAIN } from '../domain/principals.js'
import { pairKey, type PermissionEngine, type Subject } from './engine.js'
import { isRootAccount } from '../domain/root.js'
import { byCodeUnits } from '../domain/textOrder.js'

export interface EffectivePermission {
  obj: string
  act: string
  /** Where the grant that makes it effective lives: the requested domain or `global`. */
  domain: string
  source: 'role' | 'user'
  label: string
  group_name: string
  /** When the user's override that gives it stops counting (RFC 3339); null for role grants and overrides that do not expire. */
  expires_at: string | null
}

/** The domains whose rows reach a subject in `domain`: that domain and `global` (a grant in `global` counts everywhere). */
function reachingDomains(domain: string): string[] {
  return domain === GLOBAL_DOMAIN ? [GLOBAL_DOMAIN] : [domain, GLOBAL_DOMAIN]
}

/**
 * A user's effective set in one domain: every active catalog pair the engine
 * allows, each attributed to the grant that gives it. The decision itself is
 * always `engine.decide`, so this list, the check endpoint and the route guard agree.
 */
export function effectivePermissions(engine: PermissionEngine, subject: Subject, domain: string): EffectivePermission[] {
  const domains = reachingDomains(domain)
  const userAllows = new Map<string, string>()
  const roleAllows = new Map<string, string>()
  if (!isRootAccount(engine, subject)) {
    for (const rule of engine.rulesOf(subject.id, domains)) {
      if (rule.effect !== 'allow') continue
      const key = pairKey(rule.obj, rule.act)
      if (!userAllows.has(key) || rule.domain === domain) userAllows.set(key, rule.domain)
    }
    // System-owner users get only the sub-role's global grants; merchant users also their merchant's.
    const roleDomains = subject.principal_type === 'merchant' ? domains : [GLOBAL_DOMAIN]
    for (const rule of engine.rulesOf(subject.sub_role_code, roleDomains)) {
      if (rule.effect !== 'allow') continue
      const key = pairKey(rule.obj, rule.act)
      if (!roleAllows.has(key) || rule.domain === domain) roleAllows.set(key, rule.domain)
    }
  }
  const result: EffectivePermission[] = []
  for (const entry of engine.catalogEntries()) {
    if (!engine.decide(subject, domain, entry.obj, entry.act)) continue
    const key = pairKey(entry.obj, entry.act)
    const userDomain = userAllows.get(key)
    const source = userDomain !== undefined ? 'user' : 'role'
    const expiresAt = userDomain === undefined ? null : engine.overrideExpiresAt(subject.id, userDomain, entry.obj, entry.act)
    result.push({
      obj: entry.obj,
      act: entry.act,
      domain: userDomain ?? roleAllows.get(key) ?? domain,
      source,
      label: entry.label,
      group_name: entry.group_name,
      expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    })
  }
  return result.sort((a, b) => byCodeUnits(a.obj, b.obj) || byCodeUnits(a.act, b.act))
}
