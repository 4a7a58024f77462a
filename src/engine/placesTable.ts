/**
 * A subject's rows of one combination of values: their places in the list,
 * ascending. Most such lists hold one row, kept as the bare number: an
 * array per row would cost more than the row itself.
 */
export type Places = number | number[]

const EMPTY = -1
/** A part is grown (doubled) when more than this share of its slots is taken: linear probing stays short below it. */
const FULLEST = 0.6
const FIRST_SLOTS = 4
/**
 * The table is split by hash into this many parts, each growing on its own
 * (as the row tables of modelRows.ts are): growing moves one part's keys,
 * about 4,000 at a million rows, instead of every key at once, which would
 * hold a write for a tenth of a second.
 */
const PARTS = 256
/** The top 8 bits of a key's hash pick its part, the low bits its slot there. */
const PART_SHIFT = 24

/** A key's hash: a multiplicative mix of both numbers. */
function spread(subject: number, combo: number): number {
  let h = Math.imul(subject, 0x9e3779b1) ^ Math.imul(combo + 0x7f4a7c15, 0x85ebca77)
  h ^= h >>> 15
  h = Math.imul(h, 0x2c1b3c6d)
  return (h ^ (h >>> 12)) >>> 0
}

/** One part: its keys and values in slots of typed arrays, a power of two of them. */
interface Part {
  subjects: Int32Array
  combos: Int32Array
  values: Int32Array
  mask: number
  size: number
}

function newPart(slots: number): Part {
  return { subjects: new Int32Array(slots).fill(EMPTY), combos: new Int32Array(slots), values: new Int32Array(slots), mask: slots - 1, size: 0 }
}

/** The slot holding the key in `part`, or the empty slot where it would go. */
function slotOf(part: Part, subject: number, combo: number, hash: number): number {
  const { subjects, combos, mask } = part
  let slot = hash & mask
  for (;;) {
    const held = subjects[slot] as number
    if (held === EMPTY || (held === subject && combos[slot] === combo)) return slot
    slot = (slot + 1) & mask
  }
}

/**
 * Places keyed on (subject id, combination id), in open-addressing hash
 * tables of typed arrays with linear probing. A million rows make three
 * typed arrays per part instead of a map per subject with a million entries
 * between them: filing them allocates (and the garbage collector copies)
 * almost nothing, and a look-up reads one run of neighbouring slots. A
 * slot's value is the place of its one row, or -(k + 1) for the list of
 * places `lists[k]`.
 */
export class PlacesTable {
  private readonly parts: Part[] = []
  /** The lists of more than one place; `free` holds the indexes no slot uses. */
  private readonly lists: number[][] = []
  private readonly free: number[] = []

  /** `expected`: the keys the table will hold soon (a load's rows), so that filing them grows nothing. */
  constructor(expected = 0) {
    let slots = FIRST_SLOTS
    while (slots * FULLEST < expected / PARTS) slots *= 2
    for (let p = 0; p < PARTS; p++) this.parts.push(newPart(slots))
  }

  /** Keys held. */
  get size(): number {
    let keys = 0
    for (const part of this.parts) keys += part.size
    return keys
  }

  /** Lists of several places held by some key (the others wait in `free` for reuse). */
  get listsHeld(): number {
    return this.lists.length - this.free.length
  }

  get(subject: number, combo: number): Places | undefined {
    const hash = spread(subject, combo)
    const part = this.parts[hash >>> PART_SHIFT] as Part
    const slot = slotOf(part, subject, combo, hash)
    if (part.subjects[slot] === EMPTY) return undefined
    const value = part.values[slot] as number
    return value >= 0 ? value : (this.lists[-value - 1] as number[])
  }

  /** Sets the key's places; a list is kept by reference (its owner may push to it). */
  set(subject: number, combo: number, places: Places): void {
    const hash = spread(subject, combo)
    const p = hash >>> PART_SHIFT
    let part = this.parts[p] as Part
    let slot = slotOf(part, subject, combo, hash)
    if (part.subjects[slot] === EMPTY) {
      if (part.size + 1 > FULLEST * (part.mask + 1)) {
        part = this.grow(p)
        slot = slotOf(part, subject, combo, hash)
      }
      part.subjects[slot] = subject
      part.combos[slot] = combo
      part.size++
    } else {
      const value = part.values[slot] as number
      if (value < 0 && this.lists[-value - 1] === places) return
      this.release(value)
    }
    if (typeof places === 'number') {
      part.values[slot] = places
      return
    }
    const k = this.free.pop() ?? this.lists.length
    this.lists[k] = places
    part.values[slot] = -(k + 1)
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
    const hash = spread(subject, combo)
    const part = this.parts[hash >>> PART_SHIFT] as Part
    const { subjects, combos, values, mask } = part
    let free = slotOf(part, subject, combo, hash)
    if (subjects[free] === EMPTY) return
    this.release(values[free] as number)
    part.size--
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
    for (const part of this.parts) {
      part.subjects.fill(EMPTY)
      part.size = 0
    }
    this.lists.length = 0
    this.free.length = 0
  }

  /** Every key held, in no particular order. */
  forEachKey(visit: (subject: number, combo: number) => void): void {
    for (const { subjects, combos } of this.parts) {
      for (let slot = 0; slot < subjects.length; slot++) if (subjects[slot] !== EMPTY) visit(subjects[slot] as number, combos[slot] as number)
    }
  }

  /** Part `p` with twice the slots, its keys moved: the new part. */
  private grow(p: number): Part {
    const old = this.parts[p] as Part
    const part = newPart((old.mask + 1) * 2)
    for (let slot = 0; slot <= old.mask; slot++) {
      const subject = old.subjects[slot] as number
      if (subject === EMPTY) continue
      const combo = old.combos[slot] as number
      const to = slotOf(part, subject, combo, spread(subject, combo))
      part.subjects[to] = subject
      part.combos[to] = combo
      part.values[to] = old.values[slot] as number
    }
    part.size = old.size
    this.parts[p] = part
    return part
  }
}
