import type { Model } from 'casbin'
import { ROWS_PER_TURN, inSlices } from './inSlices.js'
import { ProbingTable } from './probingTable.js'
import { hashRow, sameRow } from './rows.js'

/**
 * Direct edits of a Casbin model's rule lists: both lists of the reference model,
 * and the `g` list in 'candidates' mode (the role manager does not read its order).
 * Casbin's own addPolicy/removePolicy scan the whole list comparing rows (and
 * removal then copies it): at a million rules that blocks every check for 40
 * to 100 ms per write. Here each list has a hash table of row positions beside
 * it (probingTable.ts), so finding a row is a few probes, adding one is a push, and removing one
 * moves the last row into its place: the list's order changes, which the
 * reference model's effect (some allow and no deny) never looks at.
 *
 * The table is kept in a WeakMap keyed by the list itself. Casbin replaces the
 * list when it removes rows and pushes onto it when it adds them, so a table
 * whose list is not the assertion's current one, or whose length differs, is
 * rebuilt before use: a change made behind these functions' back costs one
 * scan instead of wrong answers.
 */

/**
 * The positions of one rule list's rows, in the engine's probing table: an
 * id is a row's place in the list, and a key is a row's values.
 */
export class RowTable extends ProbingTable<readonly string[]> {
  /** While a table is built a slice at a time (fileSome): the positions of `rows` filed so far. */
  private filed = 0
  private building = true

  /**
   * `rows` may hold holes (undefined) where rows were taken out keeping the
   * others' places (see takeKeepingPlaces). With `later`, no row is filed
   * yet: fileSome() files them a slice at a time.
   */
  constructor(
    readonly rows: Array<string[] | undefined>,
    later = false,
  ) {
    // Sized for the rows at hand, so a large load does not grow each part several times over.
    super(rows.length)
    if (!later) this.fileSome(rows.length)
  }

  protected override matches(id: number, values: readonly string[]): boolean {
    return sameRow(this.rows[id] as string[], values)
  }

  /** Whether every row of the list is filed (changes are only made to a complete table). */
  get complete(): boolean {
    return !this.building
  }

  /** Files up to `count` more rows of the list, while the table is being built; whether it is now complete. */
  fileSome(count: number): boolean {
    if (!this.building) return true
    const { rows } = this
    const end = Math.min(rows.length, this.filed + count)
    for (let pos = this.filed; pos < end; pos++) {
      const row = rows[pos]
      if (row !== undefined) this.insert(pos, hashRow(row))
    }
    this.filed = end
    this.building = end < rows.length
    return !this.building
  }

  /** Whether this table still describes `rows` (see the note at the top of the file). */
  describes(rows: string[][]): boolean {
    return rows === this.rows && rows.length === this.count
  }

  /** Whether a row equal to `values` is held. */
  has(values: readonly string[]): boolean {
    return this.find(values, hashRow(values)) !== -1
  }

  /** Appends a row the caller knows is not there yet. */
  push(row: string[]): void {
    this.rows.push(row)
    this.insert(this.rows.length - 1, hashRow(row))
  }

  /** Removes one row equal to `values`, filling its place in the list with the last row; whether there was one. */
  removeMovingLast(values: readonly string[]): boolean {
    const pos = this.remove(values, hashRow(values))
    if (pos === -1) return false
    const last = this.rows.length - 1
    if (pos !== last) {
      const moved = this.rows[last] as string[]
      this.renumber(hashRow(moved), last, pos)
      this.rows[pos] = moved
    }
    this.rows.pop()
    return true
  }

  /**
   * Takes one row equal to `values` out, leaving a hole (undefined) in its
   * place in the list so the other rows keep theirs: for lists whose order
   * counts. Its place, or -1 when there is none.
   */
  takeKeepingPlaces(values: readonly string[]): number {
    const pos = this.remove(values, hashRow(values))
    if (pos !== -1) this.rows[pos] = undefined
    return pos
  }
}

const tables = new WeakMap<string[][], RowTable>()

function tableOf(model: Model, ptype: 'p' | 'g'): RowTable {
  const assertion = model.model.get(ptype)?.get(ptype)
  if (assertion === undefined) throw new Error(`the model has no ${ptype} section`)
  const rows = assertion.policy
  let table = tables.get(rows)
  // A table still being built a slice at a time (indexRowsSoon) is finished now: a write cannot wait for it.
  if (table !== undefined && !table.complete && table.rows === rows) table.fileSome(rows.length)
  if (table === undefined || !table.describes(rows)) {
    table = new RowTable(rows)
    tables.set(rows, table)
  }
  return table
}

/** Builds the tables of the given rule lists now, so the first write after a load does not pay for it. */
export function indexRows(model: Model, ptypes: ReadonlyArray<'p' | 'g'> = ['p', 'g']): void {
  for (const ptype of ptypes) tableOf(model, ptype)
}

/**
 * Builds the tables of the given rule lists in the background (inSlices): a
 * load is ready without them (at a million rules they take about a third of
 * a second), and nothing waits for them but a write, which finishes the
 * table it needs at once (tableOf).
 */
export function indexRowsSoon(model: Model, ptypes: ReadonlyArray<'p' | 'g'> = ['p', 'g']): void {
  for (const ptype of ptypes) {
    const rows = model.model.get(ptype)?.get(ptype)?.policy
    if (rows === undefined) continue
    if (rows.length <= ROWS_PER_TURN) {
      tableOf(model, ptype)
      continue
    }
    const table = new RowTable(rows, true)
    tables.set(rows, table)
    // A table replaced (a reload, Casbin's own list swap) or finished by a write needs no more slices.
    inSlices((count) => tables.get(rows) !== table || table.fileSome(count))
  }
}

/** Whether a row equal to `values` is in the model. */
export function hasRow(model: Model, ptype: 'p' | 'g', values: readonly string[]): boolean {
  return tableOf(model, ptype).has(values)
}

/** Appends a row the caller knows is not there yet. */
export function appendRow(model: Model, ptype: 'p' | 'g', values: readonly string[]): string[] {
  const row = [...values]
  tableOf(model, ptype).push(row)
  return row
}

/**
 * Removes every row equal to `values`, as Casbin's removePolicy does (there is
 * at most one: casbin_rule is unique); false when there is none.
 */
export function removeRows(model: Model, ptype: 'p' | 'g', values: readonly string[]): boolean {
  const table = tableOf(model, ptype)
  let removed = false
  while (table.removeMovingLast(values)) removed = true
  return removed
}
