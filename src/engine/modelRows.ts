import type { Model } from 'casbin'

/**
 * Direct edits of a Casbin model's rule lists, for the reference model only.
 * Casbin's own addPolicy/removePolicy scan the whole list comparing rows (and
 * removal then copies it): at a million rules that blocks every check for 40
 * to 100 ms per write. Here each list has a hash table of row positions beside
 * it, so finding a row is a few probes, adding one is a push, and removing one
 * moves the last row into its place: the list's order changes, which the
 * reference model's effect (some allow and no deny) never looks at.
 *
 * The table is kept in a WeakMap keyed by the list itself. Casbin replaces the
 * list when it removes rows and pushes onto it when it adds them, so a table
 * whose list is not the assertion's current one, or whose length differs, is
 * rebuilt before use: a change made behind these functions' back costs one
 * scan instead of wrong answers.
 */

/** Slots per row at most (load factor 1/2), so a missing row ends its probe after a couple of slots. */
const MAX_LOAD = 2
/** Below one row per eight slots the table is rebuilt smaller: a policy that shrank does not keep its peak size. */
const MIN_LOAD = 8
const MIN_SLOTS = 16

/**
 * FNV-1a over every field with a separator between fields, then a final mix
 * so the low bits (which pick the slot) depend on every character. Kept to 30
 * bits so the value is a small integer V8 stores unboxed in a plain array.
 */
function hashRow(values: readonly string[]): number {
  let h = 0x811c9dc5
  for (let f = 0; f < values.length; f++) {
    const value = values[f] as string
    for (let i = 0; i < value.length; i++) h = Math.imul(h ^ value.charCodeAt(i), 0x01000193)
    h = Math.imul(h ^ 0xffff, 0x01000193)
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h & 0x3fffffff
}

function sameRow(row: readonly string[], values: readonly string[]): boolean {
  if (row.length !== values.length) return false
  for (let f = 0; f < values.length; f++) if (row[f] !== values[f]) return false
  return true
}

function slotCount(rows: number): number {
  let slots = MIN_SLOTS
  while (slots < rows * MAX_LOAD) slots *= 2
  return slots
}

/**
 * Open addressing with linear probing over one rule list. Plain arrays of
 * small integers rather than typed arrays: they live on the V8 heap, so heap
 * figures (the bench's bytes per rule) include them.
 */
class RowTable {
  /** Position in `rows` plus one, per slot; 0 is an empty slot. */
  private slots: number[] = []
  private mask = 0
  /** The hash of the row at each position, so moving or rehashing a row never reads its strings again. */
  private readonly hashes: number[]

  constructor(readonly rows: string[][]) {
    this.hashes = rows.map(hashRow)
    this.resize(slotCount(rows.length))
  }

  /** Whether this table still describes `rows` (see the note at the top of the file). */
  describes(rows: string[][]): boolean {
    return rows === this.rows && rows.length === this.hashes.length
  }

  private resize(size: number): void {
    const slots = new Array<number>(size).fill(0)
    const mask = size - 1
    const hashes = this.hashes
    for (let pos = 0; pos < hashes.length; pos++) {
      let i = (hashes[pos] as number) & mask
      while (slots[i] !== 0) i = (i + 1) & mask
      slots[i] = pos + 1
    }
    this.slots = slots
    this.mask = mask
  }

  private place(pos: number): void {
    let i = (this.hashes[pos] as number) & this.mask
    while (this.slots[i] !== 0) i = (i + 1) & this.mask
    this.slots[i] = pos + 1
  }

  /** The slot holding a row equal to `values`, or -1. */
  find(values: readonly string[], hash = hashRow(values)): number {
    for (let i = hash & this.mask; ; i = (i + 1) & this.mask) {
      const at = this.slots[i] as number
      if (at === 0) return -1
      if (this.hashes[at - 1] === hash && sameRow(this.rows[at - 1] as string[], values)) return i
    }
  }

  /** Appends a row the caller knows is not there yet. */
  push(row: string[]): void {
    if ((this.rows.length + 1) * MAX_LOAD > this.slots.length) {
      this.hashes.push(hashRow(row))
      this.rows.push(row)
      this.resize(this.slots.length * 2)
      return
    }
    this.hashes.push(hashRow(row))
    this.rows.push(row)
    this.place(this.rows.length - 1)
  }

  /** Removes the row in `slot`, filling its place in the list with the last row. */
  removeSlot(slot: number): void {
    const pos = (this.slots[slot] as number) - 1
    this.vacate(slot)
    const last = this.rows.length - 1
    if (pos !== last) {
      const hash = this.hashes[last] as number
      let i = hash & this.mask
      while (this.slots[i] !== last + 1) i = (i + 1) & this.mask
      this.slots[i] = pos + 1
      this.rows[pos] = this.rows[last] as string[]
      this.hashes[pos] = hash
    }
    this.rows.pop()
    this.hashes.pop()
    if (this.slots.length > MIN_SLOTS && this.rows.length * MIN_LOAD < this.slots.length) this.resize(slotCount(this.rows.length))
  }

  /**
   * Empties a slot without tombstones: later entries of the same probe run
   * move back into the hole unless their home slot lies after it, so every
   * lookup still stops at the first empty slot.
   */
  private vacate(slot: number): void {
    let hole = slot
    for (let j = (hole + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const at = this.slots[j] as number
      if (at === 0) break
      const home = (this.hashes[at - 1] as number) & this.mask
      const reachable = hole <= j ? hole < home && home <= j : hole < home || home <= j
      if (!reachable) {
        this.slots[hole] = at
        hole = j
      }
    }
    this.slots[hole] = 0
  }
}

const tables = new WeakMap<string[][], RowTable>()

function tableOf(model: Model, ptype: 'p' | 'g'): RowTable {
  const assertion = model.model.get(ptype)?.get(ptype)
  if (assertion === undefined) throw new Error(`the model has no ${ptype} section`)
  const rows = assertion.policy
  let table = tables.get(rows)
  if (table === undefined || !table.describes(rows)) {
    table = new RowTable(rows)
    tables.set(rows, table)
  }
  return table
}

/** Builds the tables of both rule lists now, so the first write after a load does not pay for it. */
export function indexRows(model: Model): void {
  tableOf(model, 'p')
  tableOf(model, 'g')
}

/** Whether a row equal to `values` is in the model. */
export function hasRow(model: Model, ptype: 'p' | 'g', values: readonly string[]): boolean {
  return tableOf(model, ptype).find(values) !== -1
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
  const hash = hashRow(values)
  let removed = false
  for (let slot = table.find(values, hash); slot !== -1; slot = table.find(values, hash)) {
    table.removeSlot(slot)
    removed = true
  }
  return removed
}
