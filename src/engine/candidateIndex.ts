import { RowTable } from './modelRows.js'
import type { Alternative, Field, Pin } from './matcherAnalysis.js'
import { PlacesTable, type Places } from './placesTable.js'
import { sameRow } from './rows.js'

/** The policy fields a p row is keyed on, in the row's order (p = sub, dom, obj, act, eft). */
const POSITION: Record<Field, number> = { sub: 0, dom: 1, obj: 2, act: 3 }

/**
 * One table: rows keyed on their subject and on the values of `fields`.
 * The values are interned once (`combos`: value → … → id, shared by every
 * subject), so a question builds no key string and a row costs a number
 * in its subject's map.
 */
interface Table {
  fields: Array<Exclude<Field, 'sub'>>
  /** Where a row holds each of `fields`. */
  positions: number[]
  combos: Map<string, unknown>
  nextCombo: number
  /** (subject id, combo id) → its rows' places */
  rows: PlacesTable
}

/** One alternative, compiled: the table its rows are found in and where each key value comes from. */
interface Lookup {
  alternative: Alternative
  pins: Pin[]
  table: Table
  /** An earlier lookup of the same table and pins (the shipped matcher's two `global` alternatives): its combination is this one's. */
  sameAs: number
}

const samePin = (a: Pin, b: Pin): boolean => (a.from === 'literal' ? b.from === 'literal' && a.value === b.value : b.from === 'request' && a.field === b.field)

/** The role links a question follows (the decision index's). */
export interface RoleLinks {
  rolesReached(subject: string, domain: string): readonly string[]
  linkDomains(): Iterable<string>
}

/** The same links read the other way: who reaches the roles (the decision index's). */
export interface MemberLinks {
  /** Adds to `into` every member reaching one of `roles` in `domain`, the roles included. */
  membersReaching(roles: Iterable<string>, domain: string, into: Set<string>): Set<string>
}

function withoutHoles(places: ReadonlyArray<string[] | undefined>): string[][] {
  const rows: string[][] = []
  for (const row of places) if (row !== undefined) rows.push(row)
  return rows
}

const ascending = (a: number, b: number): number => a - b

/** Where `place` is in an ascending list, or where it would go. */
function placeIn(list: readonly number[], place: number): number {
  let lo = 0
  let hi = list.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((list[mid] as number) < place) lo = mid + 1
    else hi = mid
  }
  return lo
}

/** Where a pin's value comes from, for one request. */
const valueOf = (pin: Pin, request: readonly string[]): string => (pin.from === 'literal' ? pin.value : (request[POSITION[pin.field]] as string))

/** The id of the combination of a row's values at the table's positions; undefined when no row has it and `create` is false. */
function comboId(table: Table, row: readonly string[], create: boolean): number | undefined {
  const { positions } = table
  if (positions.length === 0) return 0
  let level = table.combos
  for (let i = 0; i < positions.length - 1; i++) {
    const value = row[positions[i] as number] ?? ''
    let next = level.get(value) as Map<string, unknown> | undefined
    if (next === undefined) {
      if (!create) return undefined
      next = new Map()
      level.set(value, next)
    }
    level = next
  }
  const last = row[positions[positions.length - 1] as number] ?? ''
  let id = level.get(last) as number | undefined
  if (id === undefined && create) {
    id = table.nextCombo++
    level.set(last, id)
  }
  return id
}

/**
 * A subject's list of one combination longer than this: finding a row to
 * remove by reading the list would cost more than a row table's probes.
 */
const LONG_LIST = 32

/**
 * The p rows a question can match, by the fields the matcher's alternatives
 * pin: for each alternative, a table keyed on the subject and its pinned
 * fields. A question looks up, per alternative, the requester and every
 * role it may reach, and gets back a superset of the rows Casbin's matcher
 * accepts, in the model list's order, so that the model's matcher and
 * effect evaluated over them alone decide as over the whole list.
 */
export class CandidateIndex {
  private readonly lookups: Lookup[]
  private readonly tables: Table[] = []
  /**
   * Every row at its place in the model's list, holes (undefined) where rows
   * were taken out: a row's place is its index here, so removing one moves
   * no other, and the list in order is this array without its holes.
   */
  private places: Array<string[] | undefined>
  /** Rows held. */
  private count = 0
  /**
   * Row → place, once some list is longer than LONG_LIST: a write then finds
   * its row in a few probes whatever the length of its subject's lists.
   * Until then a row is found by reading its list, and the load builds no
   * table (it would cost a hash of every row and 16 bytes a row).
   */
  private table: RowTable | null = null
  /** Kept between questions: a question allocates no lists of its own. */
  private readonly found: number[] = []
  private readonly lists: Places[] = []
  /** Each lookup's combination id in the question being answered. */
  private readonly ids: Array<number | undefined> = []
  private readonly rowsOut: Array<readonly string[]> = []

  /** `rows` (the model's list, in its order) becomes the index's own: it is not copied. */
  constructor(alternatives: readonly Alternative[], rows: string[][]) {
    // Alternatives pinning the same fields share one table.
    this.lookups = alternatives.map((alternative) => {
      const fields = (['dom', 'obj', 'act'] as const).filter((f) => alternative.pins[f] !== undefined)
      let table = this.tables.find((t) => t.fields.join() === fields.join())
      if (table === undefined) {
        table = { fields, positions: fields.map((f) => POSITION[f]), combos: new Map(), nextCombo: 1, rows: new PlacesTable(rows.length) }
        this.tables.push(table)
      }
      return { alternative, pins: fields.map((f) => alternative.pins[f] as Pin), table, sameAs: -1 }
    })
    this.lookups.forEach((lookup, i) => {
      lookup.sameAs = this.lookups.findIndex((l, j) => j < i && l.table === lookup.table && l.pins.every((pin, k) => samePin(pin, lookup.pins[k] as Pin)))
    })
    this.places = rows
    this.fileAll()
  }

  /** Files every row of `places` (a list without holes, none filed yet) and builds the row table when some list is long. */
  private fileAll(): void {
    const places = this.places as string[][]
    let long = false
    for (let place = 0; place < places.length; place++) long = this.file(places[place] as string[], place) || long
    this.count = places.length
    this.table = long ? new RowTable(places) : null
  }

  /** Rows held. */
  get size(): number {
    return this.table?.count ?? this.count
  }

  /** Files the row at `place` (larger than every place filed before) in every table; whether a list is now long. */
  private file(row: readonly string[], place: number): boolean {
    let long = false
    const sub = row[0] ?? ''
    const subject = this.subjectId(sub)
    for (const table of this.tables) {
      const id = comboId(table, row, true) as number
      const held = table.rows.get(subject, id)
      if (held === undefined) {
        table.rows.set(subject, id, place)
        if (this.reverseBuilt) this.subjectsAt(table, id).add(sub)
      } else if (typeof held === 'number') table.rows.set(subject, id, [held, place])
      else long = held.push(place) > LONG_LIST || long
    }
    return long
  }

  /** The places of the rows filed in `table` with the subject and values of `row`. */
  private placesOf(table: Table, row: readonly string[]): Places | undefined {
    const id = comboId(table, row, false)
    const subject = this.subjectIds.get(row[0] ?? '')
    return id === undefined || subject === undefined ? undefined : table.rows.get(subject, id)
  }

  /** The place of a row equal to `row`, or -1. */
  private placeOf(row: readonly string[]): number {
    const held = this.tables.length === 0 ? undefined : this.placesOf(this.tables[0] as Table, row)
    if (held === undefined) return -1
    if (typeof held === 'number') return sameRow(this.places[held] as string[], row) ? held : -1
    for (let i = 0; i < held.length; i++) if (sameRow(this.places[held[i] as number] as string[], row)) return held[i] as number
    return -1
  }

  /** A row appended to the model's list. */
  add(row: readonly string[]): void {
    if (this.places.length > 4 * this.size + 100_000) this.compact()
    const place = this.places.length
    const copy = [...row]
    if (this.table === null) {
      this.places.push(copy)
      this.count++
    } else {
      this.table.push(copy)
    }
    if (this.file(copy, place) && this.table === null) this.table = new RowTable(this.places)
  }

  /** Takes a row equal to `row` out of `places`, leaving a hole; its place, or -1. */
  private take(row: readonly string[]): number {
    if (this.table !== null) return this.table.takeKeepingPlaces(row)
    const place = this.placeOf(row)
    if (place !== -1) {
      this.places[place] = undefined
      this.count--
    }
    return place
  }

  /** A row taken out of the model's list (the others keep their order); every copy of it, as Casbin's removePolicy. */
  remove(row: readonly string[]): void {
    for (let place = this.take(row); place !== -1; place = this.take(row)) {
      const subject = this.subjectIds.get(row[0] ?? '')
      if (subject === undefined) continue
      for (const table of this.tables) {
        const id = comboId(table, row, false)
        if (id === undefined) continue
        const held = table.rows.get(subject, id)
        if (held === place || held === undefined) {
          table.rows.delete(subject, id)
          this.subjectsByCombo.get(table)?.get(id)?.delete(row[0] ?? '')
        } else if (typeof held !== 'number') {
          const at = placeIn(held, place)
          if (held[at] === place) held.splice(at, 1)
          if (held.length === 1) table.rows.set(subject, id, held[0] as number)
        }
      }
    }
  }

  /** Whether the list holds this row. */
  has(row: readonly string[]): boolean {
    return this.table === null ? this.placeOf(row) !== -1 : this.table.has(row)
  }

  /**
   * The model's list in its order: a new array, which the index does not
   * touch afterwards. Linear in the rows; closes the holes left by removals
   * when they have become many.
   */
  ordered(): string[][] {
    if (this.places.length > 2 * this.size) this.compact()
    return withoutHoles(this.places)
  }

  /** Renumbers the places without holes (the order kept) and files every row again. */
  private compact(): void {
    for (const table of this.tables) table.rows.clear()
    this.subjectIds.clear()
    this.subjectNames.length = 0
    this.subjectsByCombo.clear()
    this.places = withoutHoles(this.places)
    this.fileAll()
  }

  /**
   * The rows `request` (sub, dom, obj, act) may match, in list order:
   * per alternative the requester's rows and, for a `g` tie, those of the
   * roles `links` says it reaches in the tie's domain (in any domain when
   * the tie's domain is not a request field or a literal). The array is
   * reused by the next question: read it before asking again.
   */
  candidates(request: readonly string[], links: RoleLinks): ReadonlyArray<readonly string[]> {
    const { found, lists, rowsOut, places } = this
    found.length = 0
    lists.length = 0
    rowsOut.length = 0
    const sub = request[0] as string
    // -1 when the requester has no rows of its own (a user, most often): no key holds it.
    const subject = this.subjectIds.get(sub) ?? -1
    const ids = this.ids
    for (let a = 0; a < this.lookups.length; a++) {
      const { alternative, pins, table, sameAs } = this.lookups[a] as Lookup
      const id = sameAs === -1 ? CandidateIndex.requestCombo(table, pins, request) : ids[sameAs]
      ids[a] = id
      if (id === undefined) continue
      const bySub = table.rows
      this.collect(bySub, subject, id)
      const tie = alternative.subject
      if (tie.kind === 'exact') continue
      if (tie.domain !== 'any') {
        const domain = tie.domain.from === 'literal' ? tie.domain.value : (request[POSITION[tie.domain.field]] as string)
        const roles = links.rolesReached(sub, domain)
        for (let i = 0; i < roles.length; i++) this.collectOf(bySub, roles[i] as string, id)
      } else {
        for (const domain of links.linkDomains()) for (const role of links.rolesReached(sub, domain)) this.collectOf(bySub, role, id)
      }
    }
    if (lists.length === 1) {
      const list = lists[0] as Places
      if (typeof list === 'number') rowsOut.push(places[list] as string[])
      else for (let i = 0; i < list.length; i++) rowsOut.push(places[list[i] as number] as string[])
      return rowsOut
    }
    for (const list of lists) {
      if (typeof list === 'number') found.push(list)
      else for (let i = 0; i < list.length; i++) found.push(list[i] as number)
    }
    found.sort(ascending)
    // Rows of several tables may be the same row: each once (equal places are neighbours once sorted).
    let last = -1
    for (let i = 0; i < found.length; i++) {
      const place = found[i] as number
      if (place !== last) rowsOut.push(places[place] as string[])
      last = place
    }
    return rowsOut
  }

  /** The combination id of the request's values for a table's pins, without building a key. */
  private static requestCombo(table: Table, pins: readonly Pin[], request: readonly string[]): number | undefined {
    if (pins.length === 0) return 0
    let level: unknown = table.combos
    for (let i = 0; i < pins.length; i++) {
      level = (level as Map<string, unknown>).get(valueOf(pins[i] as Pin, request))
      if (level === undefined) return undefined
    }
    return level as number
  }

  private collect(bySub: PlacesTable, subject: number, id: number): void {
    if (subject === -1) return
    const list = bySub.get(subject, id)
    // Two alternatives may ask for the same list (the same subject and values): it counts once.
    if (list !== undefined && !this.lists.includes(list)) this.lists.push(list)
  }

  private collectOf(bySub: PlacesTable, sub: string, id: number): void {
    this.collect(bySub, this.subjectIds.get(sub) ?? -1, id)
  }

  /**
   * subject → its id in the tables' keys, given on the subject's first row
   * and kept (a subject whose rows are all removed keeps its id until the
   * next compact()): subjectNames reads an id back.
   */
  private readonly subjectIds = new Map<string, number>()
  private readonly subjectNames: string[] = []

  private subjectId(sub: string): number {
    let id = this.subjectIds.get(sub)
    if (id === undefined) {
      id = this.subjectNames.length
      this.subjectNames.push(sub)
      this.subjectIds.set(sub, id)
    }
    return id
  }

  /** Per table: combination id → the subjects having rows at it (the reverse of `rows`, for "who may hold"). */
  private readonly subjectsByCombo = new Map<Table, Map<number, Set<string>>>()
  /**
   * Whether subjectsByCombo is built. A load does not build it (only holders
   * read it, and at a million rows it is a fifth of the index's build): the
   * first possibleRequesters() does, from `rows`, and from then on every
   * filing and removal keeps it.
   */
  private reverseBuilt = false

  private reverseReady(): void {
    if (this.reverseBuilt) return
    this.reverseBuilt = true
    for (const table of this.tables) table.rows.forEachKey((subject, id) => this.subjectsAt(table, id).add(this.subjectNames[subject] as string))
  }

  private subjectsAt(table: Table, id: number): Set<string> {
    let byCombo = this.subjectsByCombo.get(table)
    if (byCombo === undefined) {
      byCombo = new Map()
      this.subjectsByCombo.set(table, byCombo)
    }
    let subjects = byCombo.get(id)
    if (subjects === undefined) {
      subjects = new Set()
      byCombo.set(id, subjects)
    }
    return subjects
  }

  /**
   * Every subject some row of which a request (any sub, `dom`, `obj`, `act`)
   * may match, with every member reaching such a subject by `links` where
   * the alternative's tie asks (in any link domain when the tie's domain is
   * not a request field or a literal): a superset of the requesters whose
   * candidates() are not empty. Null when some alternative pins a field to
   * `r.sub` or ties in the domain `r.sub`: then any requester may have rows.
   */
  possibleRequesters(dom: string, obj: string, act: string, links: RoleLinks & MemberLinks): Set<string> | null {
    const request = ['', dom, obj, act]
    const readsSub = (pin: Pin) => pin.from === 'request' && pin.field === 'sub'
    const found = new Set<string>()
    this.reverseReady()
    for (const { alternative, pins, table } of this.lookups) {
      const tie = alternative.subject
      if (pins.some(readsSub) || (tie.kind === 'role' && tie.domain !== 'any' && readsSub(tie.domain))) return null
      const id = CandidateIndex.requestCombo(table, pins, request)
      const subjects = id === undefined ? undefined : this.subjectsByCombo.get(table)?.get(id)
      if (subjects === undefined || subjects.size === 0) continue
      if (tie.kind === 'exact') {
        for (const subject of subjects) found.add(subject)
      } else if (tie.domain !== 'any') {
        links.membersReaching(subjects, valueOf(tie.domain, request), found)
      } else {
        for (const subject of subjects) found.add(subject)
        for (const domain of [...links.linkDomains()]) links.membersReaching(subjects, domain, found)
      }
    }
    return found
  }
}
