/**
 * A subject's rows of one combination of values: their places in the list,
 * ascending. Most such lists hold one row, kept as the bare number: an
 * array per row would cost more than the row itself.
 */
export type Places = number | number[]

const EMPTY = -1
/** Slots are grown (doubled) when more than this share of them is taken: linear probing stays short below it. */
const FULLEST = 0.6
const FIRST_CAPACITY = 1024

/** A slot for a key, spread over the table (a multiplicative mix of both numbers). */
function spread(subject: number, combo: number): number {
  let h = Math.imul(subject, 0x9e3779b1) ^ Math.imul(combo + 0x7f4a7c15, 0x85ebca77)
  h ^= h >>> 15
  h = Math.imul(h, 0x2c1b3c6d)
  return h ^ (h >>> 12)
}

/**
 * Places keyed on (subject id, combination id), in one open-addressing hash
 * table of typed arrays with linear probing. A million rows make three typed
 * arrays instead of a map per subject with a million entries between them:
 * filing them allocates (and the garbage collector copies) almost nothing,
 * and a look-up reads one run of neighbouring slots. A slot's value is the
 * place of its one row, or -(k + 1) for the list of places `lists[k]`.
 */
export class PlacesTable {
  private subjects: Int32Array
  private combos: Int32Array
  private values: Int32Array
  private mask: number
  /** The lists of more than one place; `free` holds the indexes no slot uses. */
  private readonly lists: number[][] = []
  private readonly free: number[] = []
  /** Keys held. */
  size = 0

  /** `expected`: the keys the table will hold soon (a load's rows), so that filing them grows nothing. */
  constructor(expected = 0) {
    let capacity = FIRST_CAPACITY
    while (capacity * FULLEST < expected) capacity *= 2
    this.subjects = new Int32Array(capacity).fill(EMPTY)
    this.combos = new Int32Array(capacity)
    this.values = new Int32Array(capacity)
    this.mask = capacity - 1
  }

  /** Lists of several places held by some key (the others wait in `free` for reuse). */
  get listsHeld(): number {
    return this.lists.length - this.free.length
  }

  /** The slot holding the key, or the empty slot where it would go. */
  private slotOf(subject: number, combo: number): number {
    const { subjects, combos, mask } = this
    let slot = spread(subject, combo) & mask
    for (;;) {
      const held = subjects[slot] as number
      if (held === EMPTY || (held === subject && combos[slot] === combo)) return slot
      slot = (slot + 1) & mask
    }
  }

  get(subject: number, combo: number): Places | undefined {
    const slot = this.slotOf(subject, combo)
    if (this.subjects[slot] === EMPTY) return undefined
    const value = this.values[slot] as number
    return value >= 0 ? value : (this.lists[-value - 1] as number[])
  }

  /** Sets the key's places; a list is kept by reference (its owner may push to it). */
  set(subject: number, combo: number, places: Places): void {
    let slot = this.slotOf(subject, combo)
    if (this.subjects[slot] === EMPTY) {
      if (this.size + 1 > FULLEST * (this.mask + 1)) {
        this.grow()
        slot = this.slotOf(subject, combo)
      }
      this.subjects[slot] = subject
      this.combos[slot] = combo
      this.size++
    } else {
      const value = this.values[slot] as number
      if (value < 0 && this.lists[-value - 1] === places) return
      this.release(value)
    }
    if (typeof places === 'number') {
      this.values[slot] = places
      return
    }
    const k = this.free.pop() ?? this.lists.length
    this.lists[k] = places
    this.values[slot] = -(k + 1)
  }

  /** A slot's value is given up: its list (if any) is free for another. */
  private release(value: number): void {
    if (value >= 0) return
    this.lists[-value - 1] = []
    this.free.push(-value - 1)
  }

  /**
   * Takes the key out. Linear probing has no tombstones here: the keys after
   * the freed slot in its run move back into it where their own slot allows,
   * so every key stays reachable from its slot without a gap.
   */
  delete(subject: number, combo: number): void {
    const { subjects, combos, values, mask } = this
    let free = this.slotOf(subject, combo)
    if (subjects[free] === EMPTY) return
    this.release(values[free] as number)
    this.size--
    for (let next = (free + 1) & mask; subjects[next] !== EMPTY; next = (next + 1) & mask) {
      const home = spread(subjects[next] as number, combos[next] as number) & mask
      // The key at `next` stays when its home lies after the free slot, up to `next` itself (cyclically).
      const stays = free <= next ? free < home && home <= next : free < home || home <= next
      if (stays) continue
      subjects[free] = subjects[next] as number
      combos[free] = combos[next] as number
      values[free] = values[next] as number
      free = next
    }
    subjects[free] = EMPTY
  }

  clear(): void {
    this.subjects.fill(EMPTY)
    this.lists.length = 0
    this.free.length = 0
    this.size = 0
  }

  /** Every key held, in no particular order. */
  forEachKey(visit: (subject: number, combo: number) => void): void {
    const { subjects, combos } = this
    for (let slot = 0; slot < subjects.length; slot++) if (subjects[slot] !== EMPTY) visit(subjects[slot] as number, combos[slot] as number)
  }

  private grow(): void {
    const { subjects, combos, values } = this
    const capacity = subjects.length * 2
    this.subjects = new Int32Array(capacity).fill(EMPTY)
    this.combos = new Int32Array(capacity)
    this.values = new Int32Array(capacity)
    this.mask = capacity - 1
    for (let slot = 0; slot < subjects.length; slot++) {
      const subject = subjects[slot] as number
      if (subject === EMPTY) continue
      const combo = combos[slot] as number
      const to = this.slotOf(subject, combo)
      this.subjects[to] = subject
      this.combos[to] = combo
      this.values[to] = values[slot] as number
    }
  }
}
