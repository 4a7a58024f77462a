import { formatPolicyCsv } from '../domain/policyCsv.js'
import { storedRules } from '../domain/policyDiff.js'
import { readStoredPolicy } from '../storage/storedPolicy.js'
import type { CommandContext } from './context.js'
import { assertDomainExists } from './permissionContext.js'

export interface PolicyExport {
  csv: string
  rules: number
  /** Stored rows not written: they decide nothing (pairs not active in the catalog, shapes the service never writes). */
  leftOut: number
}

/**
 * policy export: the stored policy as Casbin CSV (see ../domain/policyCsv.ts),
 * header first, for `newEnforcer('model.conf', file)`. With `domain`, what
 * decides in that domain, as a filtered load reads it: the p and g rows of
 * the domain and of `global` (global role grants, system-owner users'
 * assignments and overrides). Read from one snapshot; the overrides that
 * count at that moment, with their expiries. Rules of pairs not active in
 * the catalog decide nothing and are left out (counted in `leftOut`).
 */
export async function exportPolicy(ctx: Pick<CommandContext, 'db' | 'engine' | 'clock'>, options: { domain?: string | undefined } = {}): Promise<PolicyExport> {
  const { domain } = options
  if (domain !== undefined) await assertDomainExists(ctx.db, domain)
  const stored = await ctx.db.snapshot((tx) => readStoredPolicy(tx, (obj, act) => ctx.engine.isActive(obj, act), domain, ctx.clock.now()))
  const rules = storedRules(stored)
  return { csv: formatPolicyCsv(rules, { domain: domain ?? null }), rules: rules.length, leftOut: stored.dormant }
}
