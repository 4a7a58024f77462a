import type { Model } from 'casbin'
import type { RuleChange } from './decisionIndex.js'
import { sameRow } from './rows.js'

/**
 * Runs `ask` (synchronous: nothing else runs meanwhile) on the model's p
 * rows with `changes` applied, and puts every row back where it was before
 * returning, even when `ask` throws: no other question ever sees the change.
 * For models the decision index does not implement; a linear scan per
 * change, as Casbin's own.
 */
export function withRowsChanged<T>(model: Model, changes: readonly RuleChange[], ask: () => T): T {
  const rows = model.model.get('p')?.get('p')?.policy
  if (rows === undefined) return ask()
  const undo: Array<() => void> = []
  try {
    for (const { op, rule } of changes) {
      const at = rows.findIndex((row) => sameRow(row, rule))
      if (op === 'add' && at === -1) {
        rows.push([...rule])
        undo.push(() => rows.pop())
      } else if (op === 'remove' && at !== -1) {
        const [removed] = rows.splice(at, 1)
        undo.push(() => rows.splice(at, 0, removed as string[]))
      }
    }
    return ask()
  } finally {
    for (let i = undo.length - 1; i >= 0; i--) (undo[i] as () => void)()
  }
}
