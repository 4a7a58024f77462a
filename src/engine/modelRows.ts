import type { Model } from 'casbin'

/**
 * Direct edits of a Casbin model's rule lists: both lists of the reference model,
 * and the `g` list in 'candidates' mode (the role manager does not read its order).
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
/** Below one row per eight slots a part is rebuilt smaller: a policy that shrank does not keep its peak size. */
const MIN_LOAD = 8
/**
 * The table is split by hash into this many parts, each growing on its own:
 * growing moves one part's entries (about 4,000 at a million rules) instead
 * of the whole table at once, which stalled an add for about 70 ms.
 */
const PARTS = 256
/** The hash has 30 bits: the top 8 pick the part, the low 22 the slot in it. */
const PART_SHIFT = 22
const LOW_BITS = 2 ** PART_SHIFT
const LOW_MASK = LOW_BITS - 1
/** Shared by every part that holds no row yet; never written, since a part grows before its first row goes in. */
const EMPTY_PART: readonly number[] = Object.freeze([0])

/**
 * A slot holds the row's position plus one, times 2^22, plus the low 22 bits
 * of the row's hash: one integer below 2^53, which V8 keeps unboxed in an
 * array of doubles (8 bytes a slot). With the hash bits at hand, probing
 * skips most rows without reading them, and moving entries (growing, or
 * closing a hole) never reads a row: rows lie scattered over the heap, and
 * reading thousands of them made growing a part cost milliseconds.
 */
const entryOf = (pos: number, hash: number): number => (pos + 1) * LOW_BITS + (hash & LOW_MASK)
const positionOf = (entry: number): number => Math.floor(entry / LOW_BITS) - 1
// ToInt32 keeps an integer's low 32 bits exactly, so this reads the stored hash bits.
const hashBitsOf = (entry: number): number => (entry | 0) & LOW_MASK

/**
 * FNV-1a over every field with a separator between fields, then a final mix
 * so the low bits (which pick the slot) depend on every character.
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
  let slots = 4
  while (slots < rows * MAX_LOAD) slots *= 2
  return slots
}

/**
 * Open addressing with linear probing over one rule list. Plain arrays rather
 * than typed arrays: they live on the V8 heap, so heap figures (the bench's
 * bytes per rule) include them.
 */
export class RowTable {
  private readonly parts: number[][] = []
  private readonly counts: number[] = []
  /** Rows the table holds, to notice rows pushed onto the list behind its back. */
  private size = 0
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
    const start = rows.length < PARTS ? 0 : slotCount(rows.length / PARTS)
    for (let part = 0; part < PARTS; part++) {
      this.parts.push(start === 0 ? (EMPTY_PART as number[]) : new Array<number>(start).fill(0))
      this.counts.push(0)
    }
    if (!later) this.fileSome(rows.length)
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
      if (row !== undefined) this.place(pos, hashRow(row))
    }
    this.filed = end
    this.building = end < rows.length
    return !this.building
  }

  /** Rows the table holds. */
  get count(): number {
    return this.size
  }

  /** Whether this table still describes `rows` (see the note at the top of the file). */
  describes(rows: string[][]): boolean {
    return rows === this.rows && rows.length === this.size
  }

  private place(pos: number, hash: number): void {
    const part = hash >>> PART_SHIFT
    const count = this.counts[part] as number
    let slots = this.parts[part] as number[]
    if ((count + 1) * MAX_LOAD > slots.length) slots = this.resize(part, slotCount(count + 1))
    const mask = slots.length - 1
    let i = hash & mask
    while (slots[i] !== 0) i = (i + 1) & mask
    slots[i] = entryOf(pos, hash)
    this.counts[part] = count + 1
    this.size++
  }

  private resize(part: number, size: number): number[] {
    const old = this.parts[part] as number[]
    const slots = size === 0 ? (EMPTY_PART as number[]) : new Array<number>(size).fill(0)
    const mask = slots.length - 1
    for (const entry of old) {
      if (entry === 0) continue
      let i = hashBitsOf(entry) & mask
      while (slots[i] !== 0) i = (i + 1) & mask
      slots[i] = entry
    }
    this.parts[part] = slots
    return slots
  }

  /** The slot holding a row equal to `values` in the part of `hash`, or -1. */
  find(values: readonly string[], hash: number): number {
    const slots = this.parts[hash >>> PART_SHIFT] as number[]
    const mask = slots.length - 1
    const bits = hash & LOW_MASK
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      const entry = slots[i] as number
      if (entry === 0) return -1
      if (hashBitsOf(entry) === bits && sameRow(this.rows[positionOf(entry)] as string[], values)) return i
    }
  }

  /** Whether a row equal to `values` is held. */
  has(values: readonly string[]): boolean {
    return this.find(values, hashRow(values)) !== -1
  }

  /** Appends a row the caller knows is not there yet. */
  push(row: string[]): void {
    this.rows.push(row)
    this.place(this.rows.length - 1, hashRow(row))
  }

  /** Removes the row in `slot` of the part of `hash`, filling its place in the list with the last row. */
  removeSlot(hash: number, slot: number): void {
    const part = hash >>> PART_SHIFT
    const slots = this.parts[part] as number[]
    const pos = positionOf(slots[slot] as number)
    this.vacate(slots, slot)
    const last = this.rows.length - 1
    if (pos !== last) {
      const moved = this.rows[last] as string[]
      const movedHash = hashRow(moved)
      const movedSlots = this.parts[movedHash >>> PART_SHIFT] as number[]
      const mask = movedSlots.length - 1
      const entry = entryOf(last, movedHash)
      let i = movedHash & mask
      while (movedSlots[i] !== entry) i = (i + 1) & mask
      movedSlots[i] = entryOf(pos, movedHash)
      this.rows[pos] = moved
    }
    this.rows.pop()
    this.forget(part, slots)
  }

  /**
   * Takes one row equal to `values` out, leaving a hole (undefined) in its
   * place in the list so the other rows keep theirs: for lists whose order
   * counts. Its place, or -1 when there is none.
   */
  takeKeepingPlaces(values: readonly string[]): number {
    const hash = hashRow(values)
    const slot = this.find(values, hash)
    if (slot === -1) return -1
    const part = hash >>> PART_SHIFT
    const slots = this.parts[part] as number[]
    const pos = positionOf(slots[slot] as number)
    this.vacate(slots, slot)
    this.rows[pos] = undefined
    this.forget(part, slots)
    return pos
  }

  /** One row fewer in `part`, whose slots are `slots`: shrinks the part when it has become sparse. */
  private forget(part: number, slots: number[]): void {
    this.size--
    const count = (this.counts[part] as number) - 1
    this.counts[part] = count
    if (count * MIN_LOAD < slots.length && slots.length > 4) this.resize(part, count === 0 ? 0 : slotCount(count))
  }

  /**
   * Empties a slot without tombstones: later entries of the same probe run
   * move back into the hole unless their home slot lies after it, so every
   * lookup still stops at the first empty slot.
   */
  private vacate(slots: number[], slot: number): void {
    const mask = slots.length - 1
    let hole = slot
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const entry = slots[j] as number
      if (entry === 0) break
      const home = hashBitsOf(entry) & mask
      const reachable = hole <= j ? hole < home && home <= j : hole < home || home <= j
      if (!reachable) {
        slots[hole] = entry
        hole = j
      }
    }
    slots[hole] = 0
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

/** Rows filed per turn of the event loop by indexRowsSoon: about 10 ms of work, so checks in between wait no longer. */
const ROWS_PER_TURN = 25_000

/**
 * Builds the tables of the given rule lists in the background, a slice per
 * turn of the event loop: a load is ready without them (at a million rules
 * they take about a third of a second), and nothing waits for them but a
 * write, which finishes the table it needs at once (tableOf).
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
    const fileSlice = (): void => {
      // A table replaced (a reload, Casbin's own list swap) or finished by a write needs no more slices.
      if (tables.get(rows) === table && !table.fileSome(ROWS_PER_TURN)) setImmediate(fileSlice)
    }
    setImmediate(fileSlice)
  }
}

/** Whether a row equal to `values` is in the model. */
export function hasRow(model: Model, ptype: 'p' | 'g', values: readonly string[]): boolean {
  return tableOf(model, ptype).find(values, hashRow(values)) !== -1
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
    table.removeSlot(hash, slot)
    removed = true
  }
  return removed
}
