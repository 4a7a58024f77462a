import type { Adapter, FilteredAdapter, Model } from 'casbin'
import type { Queryable } from '../storage/db.js'
import { iterateOverrides } from '../storage/overrides.js'
import { iterateRulePages } from '../storage/policyRows.js'

/** A filtered load: one merchant's domain plus `global`. */
export interface DomainFilter {
  domain: string
}

function isDomainFilter(value: unknown): value is DomainFilter {
  return typeof value === 'object' && value !== null && typeof (value as DomainFilter).domain === 'string'
}

/** Fields a rule of this section has: `p = sub, dom, …` names them; `g = _, _, _` only counts them. */
function declaredWidth(assertion: { tokens: string[]; value: string }): number {
  return assertion.tokens.length > 0 ? assertion.tokens.length : (assertion.value.match(/_/g) ?? []).length
}

/**
 * An adapter that only loads. Casbin would save or change the policy through
 * its adapter; ours never do (auto-save is off), and a call that tried is a
 * bug, so it throws saying why.
 */
export abstract class ReadOnlyAdapter implements Adapter {
  /** Why this adapter's policy is never written through it. */
  protected abstract readonly refusal: string

  abstract loadPolicy(model: Model): Promise<void>

  async savePolicy(): Promise<boolean> {
    throw new Error(this.refusal)
  }

  async addPolicy(): Promise<void> {
    throw new Error(this.refusal)
  }

  async removePolicy(): Promise<void> {
    throw new Error(this.refusal)
  }

  async removeFilteredPolicy(): Promise<void> {
    throw new Error(this.refusal)
  }
}

/** How a load treats overrides that expire. */
export interface ExpiryOptions {
  /** Overrides that expired by this instant (epoch ms) are left out; default: the time of the load. */
  now?: number
  /** Told of every loaded override that expires later. */
  onExpiring?(values: readonly string[], at: number): void
  /** Keeps a copy of every row read, for a second model to load (the shadow). */
  record?: PolicyRecord
}

/**
 * Loads `casbin_rule` and the per-user overrides into a Casbin model. Rows are
 * streamed a page at a time and each row's fields are pushed as an array, so
 * no value is ever re-parsed as CSV (commas, quotes and the like stay data).
 * Writes never go through the adapter: commands write rows in their own
 * transaction and then change the enforcer in memory.
 */
export class StorageAdapter extends ReadOnlyAdapter implements FilteredAdapter {
  protected readonly refusal = 'policy is written by the service commands, not through the adapter'
  private filtered = false

  constructor(
    private readonly db: Queryable,
    private readonly expiry: ExpiryOptions = {},
  ) {
    super()
  }

  async loadPolicy(model: Model): Promise<void> {
    this.filtered = false
    await this.load(model, {})
  }

  async loadFilteredPolicy(model: Model, filter: unknown): Promise<void> {
    if (!isDomainFilter(filter)) throw new Error('the filter must be { domain: string }')
    this.filtered = true
    await this.load(model, { domain: filter.domain })
  }

  isFiltered(): boolean {
    return this.filtered
  }

  private async load(model: Model, options: { domain?: string }): Promise<void> {
    // Repeated values (domains, pairs, effects, role codes) share one string
    // each, which keeps a large policy's heap small.
    const pool = new Map<string, string>()
    const intern = (value: string): string => {
      const known = pool.get(value)
      if (known !== undefined) return known
      pool.set(value, value)
      return value
    }
    const sectionOf = policySections(model)
    const record = this.expiry.record
    for await (const page of iterateRulePages(this.db, options)) {
      for (const row of page) {
        const section = sectionOf(row.ptype)
        if (section === null && record === undefined) continue
        // The row's own array, interned in place: a million rows make a million fewer arrays.
        const fields = row.fields
        for (let i = 0; i < fields.length; i++) fields[i] = intern(fields[i] as string)
        // Kept before the padding below: the other model pads to its own width.
        record?.rules.push({ ptype: row.ptype, fields: [...fields] })
        if (section !== null) section.push(fields)
      }
    }
    const p = model.model.get('p')?.get('p')
    if (p === undefined && record === undefined) return
    const now = this.expiry.now ?? Date.now()
    for await (const override of iterateOverrides(this.db, options)) {
      const at = override.expires_at?.getTime() ?? null
      // An expired override no replica counts any more; its row waits for the sweep.
      if (at !== null && at <= now) continue
      const values = [override.user_id, override.domain, override.obj, override.act, override.effect].map(intern)
      record?.overrides.push({ values: [...values], at })
      if (p === undefined) continue
      p.policy.push(values)
      if (at !== null) this.expiry.onExpiring?.(values, at)
    }
  }

}

/**
 * A model's rule lists by ptype, each with the push that brings a stored row
 * to the width its section declares (storage drops trailing empty columns; a
 * rule whose last declared field is an empty string must still reload with
 * the model's width). Null for a ptype the model does not have.
 */
function policySections(model: Model): (ptype: string) => { push(fields: string[]): void } | null {
  // Each ptype's rule list and width, worked out once rather than per row.
  const sections = new Map<string, { push(fields: string[]): void } | null>()
  return (ptype) => {
    let section = sections.get(ptype)
    if (section === undefined) {
      const assertion = model.model.get(ptype.charAt(0))?.get(ptype)
      if (assertion === undefined) section = null
      else {
        const { policy } = assertion
        const width = declaredWidth(assertion)
        section = {
          push(fields) {
            while (fields.length < width) fields.push('')
            policy.push(fields)
          },
        }
      }
      sections.set(ptype, section)
    }
    return section
  }
}

/**
 * The rows one storage load read, kept for a second model (the shadow) to
 * load the very same policy without reading the store again. Single use:
 * the second load takes the recorded arrays as its own.
 */
export interface PolicyRecord {
  rules: Array<{ ptype: string; fields: string[] }>
  overrides: Array<{ values: string[]; at: number | null }>
}

export const emptyPolicyRecord = (): PolicyRecord => ({ rules: [], overrides: [] })

/** Loads what a storage load recorded into another model, as the storage adapter would have. */
export class RecordedAdapter extends ReadOnlyAdapter {
  protected readonly refusal = 'a recorded policy is never saved or changed'

  constructor(
    private readonly record: PolicyRecord,
    private readonly onExpiring?: (values: readonly string[], at: number) => void,
  ) {
    super()
  }

  async loadPolicy(model: Model): Promise<void> {
    const sectionOf = policySections(model)
    for (const { ptype, fields } of this.record.rules) sectionOf(ptype)?.push(fields)
    const p = model.model.get('p')?.get('p')
    if (p === undefined) return
    for (const { values, at } of this.record.overrides) {
      p.policy.push(values)
      if (at !== null) this.onExpiring?.(values, at)
    }
  }
}

/** Casbin rules as the model sees them: `p` rows (sub, dom, obj, act, eft) and `g` rows (user or role, role, domain). */
export interface PolicyRules {
  p: string[][]
  g: string[][]
}

/** Hands rules already in memory to a model; read-only like the storage adapter. */
export class RulesAdapter extends ReadOnlyAdapter {
  protected readonly refusal = 'a checked policy is never saved or changed'

  constructor(private readonly rules: PolicyRules) {
    super()
  }

  async loadPolicy(model: Model): Promise<void> {
    // Copies, so that two enforcers given the same rules never share a row.
    for (const rule of this.rules.p) model.model.get('p')?.get('p')?.policy.push([...rule])
    for (const rule of this.rules.g) model.model.get('g')?.get('g')?.policy.push([...rule])
  }
}

