import { RULE_WIDTH } from '../domain/policyCsv.js'
import { overrideKey, ruleKey, type StoredPolicy } from '../domain/policyDiff.js'
import type { Queryable } from './db.js'
import { iterateOverrides } from './overrides.js'
import { iterateRules } from './policyRows.js'

/**
 * The stored rules within reach (all, or one domain plus `global`) as the
 * engine counts them at `now` (epoch ms): overrides that have expired are not
 * read (no replica counts them; the sweep removes them), and rules of
 * inactive pairs or of shapes the service never writes are only counted.
 */
export async function readStoredPolicy(
  q: Queryable,
  isActive: (obj: string, act: string) => boolean,
  domain: string | undefined,
  now: number,
): Promise<StoredPolicy> {
  const stored: StoredPolicy = { roles: new Map(), overrides: new Map(), groupings: new Map(), dormant: 0 }
  const filter = domain === undefined ? {} : { domain }
  for await (const row of iterateRules(q, filter)) {
    const ptype = row.ptype
    if ((ptype !== 'p' && ptype !== 'g') || row.fields.length !== RULE_WIDTH[ptype]) {
      stored.dormant++
    } else if (ptype === 'g') {
      stored.groupings.set(ruleKey(row.fields), row.fields)
    } else if (!isActive(row.fields[2] ?? '', row.fields[3] ?? '')) {
      stored.dormant++
    } else {
      stored.roles.set(ruleKey(row.fields), row.fields)
    }
  }
  for await (const row of iterateOverrides(q, filter)) {
    const expiresAt = row.expires_at?.getTime() ?? null
    if (expiresAt !== null && expiresAt <= now) continue
    if (!isActive(row.obj, row.act)) {
      stored.dormant++
      continue
    }
    const values = [row.user_id, row.domain, row.obj, row.act, row.effect]
    stored.overrides.set(overrideKey(values), { values, effect: row.effect, expiresAt })
  }
  return stored
}
