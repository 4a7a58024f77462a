import { MAX_ID, PARTS, ProbingTable, mixHash, partOf } from './probingTable.js'

/**
 * A subject's rows of one combination of values: their places in the list,
 * ascending. Most such lists hold one row, kept as the bare number: an
 * array per row would cost more than the row itself.
 */
export type Places = number | number[]

/** A key is a (subject id, combination id) pair packed into one exact integer: the subject times 2^26 plus the combination. */
const COMBO_BITS = 2 ** 26
const MAX_SUBJECT = 2 ** 27

/** A key's hash (30 bits): a multiplicative mix of both numbers. */
function spread(subject: number, combo: number): number {
  return mixHash(Math.imul(subject, 0x9e3779b1) ^ Math.imul(combo + 0x7f4a7c15, 0x85ebca77))
}

function packed(subject: number, combo: number): number {
  if (subject >= MAX_SUBJECT || combo >= COMBO_BITS) throw new RangeError(`a candidate key past the table's bounds (subject ${subject}, combination ${combo})`)
  return subject * COMBO_BITS + combo
}

/**
 * One part's records, which its slots' ids name: an id is the record's
 * index here times PARTS plus the part, so a record lives in the part its
 * key hashes to and grows with it.
 */
interface Records {
  keys: Float64Array
  /** A record's place, or -(k + 1) for the list of places `lists[k]`. */
  values: Int32Array
  /** Records handed out; `free` holds those given back. */
  used: number
  free: number[]
}

const newRecords = (size: number): Records => ({ keys: new Float64Array(size), values: new Int32Array(size), used: 0, free: [] })

/**
 * Places keyed on (subject id, combination id), in the engine's probing
 * table. A million rows make a few typed arrays per part instead of a map
 * per subject with a million entries between them: filing them allocates
 * (and the garbage collector copies) almost nothing.
 */
export class PlacesTable extends ProbingTable<number> {
  private readonly records: Records[] = []
  /** The lists of more than one place; `free` holds the indexes no record uses. */
  private readonly lists: number[][] = []
  private readonly free: number[] = []

  /** `expected`: the keys the table will hold soon (a load's rows), so that filing them grows nothing. */
  constructor(expected = 0) {
    super(expected)
    const start = Math.max(4, Math.ceil(expected / PARTS))
    for (let p = 0; p < PARTS; p++) this.records.push(newRecords(start))
  }

  protected override matches(id: number, key: number): boolean {
    return (this.records[id % PARTS] as Records).keys[Math.floor(id / PARTS)] === key
  }

  /** Keys held. */
  get size(): number {
    return this.count
  }

  /** Lists of several places held by some key (the others wait in `free` for reuse). */
  get listsHeld(): number {
    return this.lists.length - this.free.length
  }

  get(subject: number, combo: number): Places | undefined {
    const id = this.find(subject * COMBO_BITS + combo, spread(subject, combo))
    if (id === -1) return undefined
    const value = (this.records[id % PARTS] as Records).values[Math.floor(id / PARTS)] as number
    return value >= 0 ? value : (this.lists[-value - 1] as number[])
  }

  /** Sets the key's places; a list is kept by reference (its owner may push to it). */
  set(subject: number, combo: number, places: Places): void {
    const hash = spread(subject, combo)
    const key = packed(subject, combo)
    let id = this.find(key, hash)
    const part = partOf(hash)
    if (id === -1) {
      id = this.newRecord(part, key)
      this.insert(id, hash)
    } else {
      const value = (this.records[part] as Records).values[Math.floor(id / PARTS)] as number
      if (value < 0 && this.lists[-value - 1] === places) return
      this.release(value)
    }
    // Read after newRecord, which may have grown the part's records.
    const records = this.records[part] as Records
    const at = Math.floor(id / PARTS)
    if (typeof places === 'number') {
      records.values[at] = places
      return
    }
    const k = this.free.pop() ?? this.lists.length
    this.lists[k] = places
    records.values[at] = -(k + 1)
  }

  /** A record for `key` in `part`: its id. */
  private newRecord(part: number, key: number): number {
    let records = this.records[part] as Records
    let at = records.free.pop()
    if (at === undefined) {
      at = records.used++
      if (at >= records.keys.length) {
        const grown = newRecords(records.keys.length * 2)
        grown.keys.set(records.keys)
        grown.values.set(records.values)
        grown.used = records.used
        grown.free = records.free
        this.records[part] = grown
        records = grown
      }
    }
    const id = at * PARTS + part
    if (id > MAX_ID) throw new RangeError('the places table is full')
    records.keys[at] = key
    return id
  }

  /** A record's value is given up: its list (if any) is free for another. */
  private release(value: number): void {
    if (value >= 0) return
    this.lists[-value - 1] = []
    this.free.push(-value - 1)
  }

  /** Takes the key out. */
  delete(subject: number, combo: number): void {
    const id = this.remove(subject * COMBO_BITS + combo, spread(subject, combo))
    if (id === -1) return
    const records = this.records[id % PARTS] as Records
    const at = Math.floor(id / PARTS)
    this.release(records.values[at] as number)
    records.free.push(at)
  }

  override clear(): void {
    super.clear()
    for (const records of this.records) {
      records.used = 0
      records.free.length = 0
    }
    this.lists.length = 0
    this.free.length = 0
  }

  /** Every key held, in no particular order. */
  forEachKey(visit: (subject: number, combo: number) => void): void {
    this.forEachId((id) => {
      const key = (this.records[id % PARTS] as Records).keys[Math.floor(id / PARTS)] as number
      visit(Math.floor(key / COMBO_BITS), key % COMBO_BITS)
    })
  }
}
