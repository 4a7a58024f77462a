import type { Model } from 'casbin'

/**
 * Direct edits of a Casbin model's rule list, for the reference model only.
 * Casbin's own addPolicy/removePolicy first scan the whole list comparing
 * rows (and removal then copies it): at a million rules that blocks every
 * check for 40 to 100 ms per write. The decision index already knows whether
 * a row is there, so adding is a push, and removing one tight scan and a
 * splice that keeps the order Casbin would keep.
 */
function rulesOf(model: Model, ptype: 'p' | 'g'): string[][] {
  const assertion = model.model.get(ptype)?.get(ptype)
  if (assertion === undefined) throw new Error(`the model has no ${ptype} section`)
  return assertion.policy
}

/** Appends a row the caller knows is not there yet. */
export function appendRow(model: Model, ptype: 'p' | 'g', values: readonly string[]): string[] {
  const row = [...values]
  rulesOf(model, ptype).push(row)
  return row
}

/**
 * Removes every row equal to `values`, as Casbin's removePolicy does (there is
 * at most one: casbin_rule is unique); false when there is none.
 */
export function removeRows(model: Model, ptype: 'p' | 'g', values: readonly string[]): boolean {
  const rules = rulesOf(model, ptype)
  const width = values.length
  const [first] = values
  const found: number[] = []
  for (let i = 0; i < rules.length; i++) {
    const row = rules[i] as string[]
    if (row[0] !== first || row.length !== width) continue
    let same = true
    for (let f = 1; f < width && same; f++) same = row[f] === values[f]
    if (same) found.push(i)
  }
  for (let k = found.length - 1; k >= 0; k--) rules.splice(found[k] as number, 1)
  return found.length > 0
}
