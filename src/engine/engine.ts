import { newEnforcer, type Enforcer } from 'casbin'
import type { CatalogEntry } from '../domain/permissions.js'
import type { PrincipalType } from '../domain/principals.js'
import type { Queryable } from '../storage/db.js'
import type { Effect } from '../storage/overrides.js'
import { StorageAdapter } from './adapter.js'
import { parseModel } from './model.js'

/** What a decision needs to know about the user asking. */
export interface Subject {
  id: string
  principal_type: PrincipalType
  merchant_id: string | null
  sub_role_code: string
}

export const pairKey = (obj: string, act: string): string => `${obj}\u0000${act}`

/** Everything the engine needs from the store besides the policy rows. */
export interface EngineState {
  rootRoles: Iterable<string>
  catalog: Iterable<CatalogEntry>
}

/**
 * Casbin's enforcer plus the little state a decision needs outside it (which
 * sub-roles are root, which pairs are active in the catalog). Casbin decides
 * every non-root answer; this class adds only the tenant rule and the root
 * bypass in front of it. Changes are applied in memory after their commit.
 */
export class PermissionEngine {
  private constructor(
    private enforcer: Enforcer,
    private readonly modelText: string,
    private rootRoles: Set<string>,
    private catalog: Map<string, CatalogEntry>,
  ) {}

  static async load(db: Queryable, modelText: string, state: EngineState): Promise<PermissionEngine> {
    const enforcer = await PermissionEngine.buildEnforcer(db, modelText)
    return new PermissionEngine(enforcer, modelText, new Set(state.rootRoles), PermissionEngine.catalogMap(state.catalog))
  }

  private static async buildEnforcer(db: Queryable, modelText: string): Promise<Enforcer> {
    const enforcer = await newEnforcer(parseModel(modelText), new StorageAdapter(db))
    enforcer.enableAutoSave(false)
    return enforcer
  }

  private static catalogMap(entries: Iterable<CatalogEntry>): Map<string, CatalogEntry> {
    const map = new Map<string, CatalogEntry>()
    for (const entry of entries) map.set(pairKey(entry.obj, entry.act), { ...entry })
    return map
  }

  /** Builds a new enforcer off to the side and swaps it in at once: no check sees a partial policy. */
  async reload(db: Queryable, state: EngineState): Promise<void> {
    const enforcer = await PermissionEngine.buildEnforcer(db, this.modelText)
    this.enforcer = enforcer
    this.rootRoles = new Set(state.rootRoles)
    this.catalog = PermissionEngine.catalogMap(state.catalog)
  }

  isRootRole(code: string): boolean {
    return this.rootRoles.has(code)
  }

  addRootRole(code: string): void {
    this.rootRoles.add(code)
  }

  isActive(obj: string, act: string): boolean {
    return this.catalog.get(pairKey(obj, act))?.is_active === true
  }

  catalogEntry(obj: string, act: string): CatalogEntry | undefined {
    return this.catalog.get(pairKey(obj, act))
  }

  catalogEntries(): CatalogEntry[] {
    return [...this.catalog.values()]
  }

  replaceCatalog(entries: Iterable<CatalogEntry>): void {
    this.catalog = PermissionEngine.catalogMap(entries)
  }

  /** Casbin alone, with no tenant rule, root bypass or catalog filter. */
  enforce(subjectId: string, domain: string, obj: string, act: string): boolean {
    return this.enforcer.enforceSync(subjectId, domain, obj, act)
  }

  /** The one decision every path uses: route guard, check endpoint, effective sets. */
  decide(subject: Subject, domain: string, obj: string, act: string): boolean {
    if (!this.isActive(obj, act)) return false
    if (subject.principal_type === 'merchant' && subject.merchant_id !== domain) return false
    if (this.rootRoles.has(subject.sub_role_code)) return true
    return this.enforce(subject.id, domain, obj, act)
  }

  hasRule(ptype: 'p' | 'g', values: readonly string[]): boolean {
    return this.enforcer.getModel().hasPolicy(ptype, ptype, [...values])
  }

  /** The allow/deny rows of one subject (a sub-role code or a user id) in the given domains. */
  rulesOf(subject: string, domains: readonly string[]): Array<{ domain: string; obj: string; act: string; effect: Effect }> {
    const rows = this.enforcer.getModel().model.get('p')?.get('p')?.policy ?? []
    const wanted = new Set(domains)
    const result: Array<{ domain: string; obj: string; act: string; effect: Effect }> = []
    for (const [sub, domain = '', obj = '', act = '', effect = ''] of rows) {
      if (sub === subject && wanted.has(domain) && (effect === 'allow' || effect === 'deny')) result.push({ domain, obj, act, effect })
    }
    return result
  }

  async addRule(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    if (ptype === 'p') await this.enforcer.addNamedPolicy('p', ...values)
    else await this.enforcer.addNamedGroupingPolicy('g', ...values)
  }

  async removeRule(ptype: 'p' | 'g', values: readonly string[]): Promise<void> {
    if (ptype === 'p') await this.enforcer.removeNamedPolicy('p', ...values)
    else await this.enforcer.removeNamedGroupingPolicy('g', ...values)
  }
}

