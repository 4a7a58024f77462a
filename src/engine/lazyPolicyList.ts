import type { Model } from 'casbin'

/**
 * Casbin's p list in 'candidates' mode, where the candidate index holds the
 * rows and their order: writes change the index only (a few probes), and
 * the list Casbin reads is built again from it, in order, the first time
 * something reads it after a write (enforce(), the loaded rules, a dry run
 * over the whole list). Keeping Casbin's list live instead costs a scan of
 * it per write (hasPolicy) and a copy per removal, tens of milliseconds at
 * a million rules.
 */
export class LazyPolicyList {
  /** The list Casbin reads; null once a write has made it stale. */
  private list: string[][] | null

  constructor(model: Model, rebuild: () => string[][]) {
    const assertion = model.model.get('p')?.get('p')
    if (assertion === undefined) throw new Error('the model has no p section')
    this.list = assertion.policy
    // Every reader (Casbin's enforce, the engine, a dry run) goes through the property, so each sees the rows of the latest write.
    Object.defineProperty(assertion, 'policy', {
      configurable: true,
      enumerable: true,
      get: () => (this.list ??= rebuild()),
      set: (rows: string[][]) => {
        this.list = rows
      },
    })
  }

  /** A row was added or removed: the list is built again when next read. */
  stale(): void {
    this.list = null
  }

  /** Runs `ask` (synchronous) with `rows` as the list, then puts back what was there, built or not, without building it. */
  withList<T>(rows: string[][], ask: () => T): T {
    const kept = this.list
    this.list = rows
    try {
      return ask()
    } finally {
      this.list = kept
    }
  }
}
