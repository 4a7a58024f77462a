import { PolicyOp, type Enforcer } from 'casbin'
import type { DecisionIndex } from '../decisionIndex.js'
import { appendRow, hasRow, removeRows } from '../modelRows.js'

/**
 * Writes that skip Casbin's scans of its lists: a row is found through the
 * decision index (the rows it keeps one for one) or the list's row table
 * (modelRows.ts, every other row), so the table never misses a change; the
 * role manager is told of the one link. For the lists whose order no effect
 * reads: both of the shipped model, and every model's `g` list.
 */
function held(enforcer: Enforcer, index: DecisionIndex, ptype: 'p' | 'g', values: readonly string[]): boolean {
  const known = ptype === 'p' ? index.hasPolicy(values) : index.hasGrouping(values)
  return known ?? hasRow(enforcer.getModel(), ptype, values)
}

/** Adds the row unless it is held; whether it was added. */
export async function addByRowTable(enforcer: Enforcer, index: DecisionIndex, ptype: 'p' | 'g', values: readonly string[]): Promise<boolean> {
  if (held(enforcer, index, ptype, values)) return false
  const row = appendRow(enforcer.getModel(), ptype, values)
  if (ptype === 'g') {
    await enforcer.buildIncrementalRoleLinks(PolicyOp.PolicyAdd, 'g', [row])
    index.addGrouping(values)
  } else {
    index.addPolicy(values)
  }
  return true
}

/** Removes the row if it is held; whether it was. */
export async function removeByRowTable(enforcer: Enforcer, index: DecisionIndex, ptype: 'p' | 'g', values: readonly string[]): Promise<boolean> {
  if (!held(enforcer, index, ptype, values)) return false
  removeRows(enforcer.getModel(), ptype, values)
  if (ptype === 'g') {
    await enforcer.buildIncrementalRoleLinks(PolicyOp.PolicyRemove, 'g', [[...values]])
    index.removeGrouping(values)
  } else {
    index.removePolicy(values)
  }
  return true
}
