/**
 * The one hash table of the engine's row look-ups (modelRows.ts' row
 * positions, placesTable.ts' candidate places): open addressing with linear
 * probing, split by hash into PARTS parts that each grow and shrink on their
 * own. Growing moves one part's entries (about 4,000 at a million keys)
 * instead of the whole table at once, which stalled a write for 70 to 190 ms.
 *
 * The table holds ids, not keys: its user says what an id stands for (a row's
 * place in a list, a record of its own) and whether the key behind an id
 * equals the key asked about (`matches`). A slot holds one number: the id plus
 * one, times 2^22, plus the low 22 bits of the key's hash, an integer below
 * 2^53 that a Float64Array holds exactly. With the hash bits at hand, probing
 * skips most entries without asking the user, and moving entries (growing,
 * shrinking, closing a hole) never reads a key: keys may lie scattered over
 * the heap.
 */

export const PARTS = 256
/** A key's hash has 30 bits: the top 8 pick the part, the low 22 the slot in it. */
const PART_SHIFT = 22
const LOW_BITS = 2 ** PART_SHIFT
const LOW_MASK = LOW_BITS - 1
/** Ids fit below this, so that a slot's number stays an exact integer. */
export const MAX_ID = 2 ** 31 - 1
/** Slots per entry at least (load factor 1/2), so a missing key ends its probe after a couple of slots. */
const MAX_LOAD = 2
/** Below one entry per eight slots a part is rebuilt smaller: a table that shrank does not keep its peak size. */
const MIN_LOAD = 8
/** Shared by every part that holds nothing yet; never written, since a part grows before its first entry goes in. */
const EMPTY_PART = new Float64Array(1)

const entryOf = (id: number, hash: number): number => (id + 1) * LOW_BITS + (hash & LOW_MASK)
const idOf = (entry: number): number => Math.floor(entry / LOW_BITS) - 1
// ToInt32 keeps an integer's low 32 bits exactly, so this reads the stored hash bits.
const hashBitsOf = (entry: number): number => (entry | 0) & LOW_MASK

/** The slots for `entries` entries: a power of two, at least four, at most half full. */
function slotCount(entries: number): number {
  let slots = 4
  while (slots < entries * MAX_LOAD) slots *= 2
  return slots
}

/** A hash of 30 bits from any 32: a final mix, so the low bits (which pick the slot) depend on every input bit. */
export function mixHash(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h & 0x3fffffff
}

/** The part a key of this hash lives in (0 to PARTS - 1). */
export const partOf = (hash: number): number => hash >>> PART_SHIFT

export abstract class ProbingTable<K> {
  private readonly parts: Float64Array[] = []
  private readonly counts = new Int32Array(PARTS)
  private entries = 0

  /** `expected`: the entries the table will soon hold (a load's rows), so that filing them grows nothing. */
  constructor(expected = 0) {
    const start = expected < PARTS ? 0 : slotCount(expected / PARTS)
    for (let part = 0; part < PARTS; part++) this.parts.push(start === 0 ? EMPTY_PART : new Float64Array(start))
  }

  /** Whether the key behind `id` equals `key`. */
  protected abstract matches(id: number, key: K): boolean

  /** Entries held. */
  get count(): number {
    return this.entries
  }

  /** The slot of the entry whose key equals `key` (of hash `hash`), or -1. */
  private slotOf(key: K, hash: number): number {
    const slots = this.parts[hash >>> PART_SHIFT] as Float64Array
    const mask = slots.length - 1
    const bits = hash & LOW_MASK
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      const entry = slots[i] as number
      if (entry === 0) return -1
      if (hashBitsOf(entry) === bits && this.matches(idOf(entry), key)) return i
    }
  }

  /** The id of the entry whose key equals `key`, or -1. */
  find(key: K, hash: number): number {
    const slot = this.slotOf(key, hash)
    return slot === -1 ? -1 : idOf((this.parts[hash >>> PART_SHIFT] as Float64Array)[slot] as number)
  }

  /** Files `id` under `hash`; the caller knows whether an equal key is held already (this does not look). */
  insert(id: number, hash: number): void {
    const part = hash >>> PART_SHIFT
    const count = this.counts[part] as number
    let slots = this.parts[part] as Float64Array
    if ((count + 1) * MAX_LOAD > slots.length) slots = this.resize(part, slotCount(count + 1))
    const mask = slots.length - 1
    let i = hash & mask
    while (slots[i] !== 0) i = (i + 1) & mask
    slots[i] = entryOf(id, hash)
    this.counts[part] = count + 1
    this.entries++
  }

  /** Takes out the entry whose key equals `key`: its id, or -1 when there is none. */
  remove(key: K, hash: number): number {
    const part = hash >>> PART_SHIFT
    const slots = this.parts[part] as Float64Array
    const slot = this.slotOf(key, hash)
    if (slot === -1) return -1
    const id = idOf(slots[slot] as number)
    this.vacate(slots, slot)
    this.entries--
    const count = (this.counts[part] as number) - 1
    this.counts[part] = count
    if (count * MIN_LOAD < slots.length && slots.length > 4) this.resize(part, count === 0 ? 0 : slotCount(count))
    return id
  }

  /** The entry filed as `from` under `hash` is now `to` (its key moved); nothing else changes. */
  renumber(hash: number, from: number, to: number): void {
    const slots = this.parts[hash >>> PART_SHIFT] as Float64Array
    const mask = slots.length - 1
    const entry = entryOf(from, hash)
    let i = hash & mask
    while (slots[i] !== entry) i = (i + 1) & mask
    slots[i] = entryOf(to, hash)
  }

  /** Every id held, in no particular order. */
  forEachId(visit: (id: number) => void): void {
    for (const slots of this.parts) for (let i = 0; i < slots.length; i++) if (slots[i] !== 0) visit(idOf(slots[i] as number))
  }

  /** Forgets every entry, keeping each part's slots. */
  clear(): void {
    for (const slots of this.parts) if (slots !== EMPTY_PART) slots.fill(0)
    this.counts.fill(0)
    this.entries = 0
  }

  private resize(part: number, size: number): Float64Array {
    const old = this.parts[part] as Float64Array
    const slots = size === 0 ? EMPTY_PART : new Float64Array(size)
    const mask = slots.length - 1
    for (let k = 0; k < old.length; k++) {
      const entry = old[k] as number
      if (entry === 0) continue
      let i = hashBitsOf(entry) & mask
      while (slots[i] !== 0) i = (i + 1) & mask
      slots[i] = entry
    }
    this.parts[part] = slots
    return slots
  }

  /**
   * Empties a slot without tombstones (delete by backward shift): later
   * entries of the same probe run move back into the hole unless their home
   * slot lies after it, so every look-up still stops at the first empty slot.
   */
  private vacate(slots: Float64Array, slot: number): void {
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
