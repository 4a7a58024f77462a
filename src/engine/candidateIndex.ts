import type { Alternative, Field, Pin } from './matcherAnalysis.js'

/** The policy fields a p row is keyed on, in the row's order (p = sub, dom, obj, act, eft). */
const POSITION: Record<Field, number> = { sub: 0, dom: 1, obj: 2, act: 3 }

/** A row and its place in the model's list: Casbin appends rows and removes them keeping the others' order, so places compare as the list does. */
interface Entry {
  seq: number
  row: readonly string[]
}

/**
 * One table: rows keyed on their subject and on the values of `fields`.
 * The values are interned once (`combos`: value → … → id, shared by every
 * subject), so a question builds no key string and a row costs a number
 * in its subject's map.
 */
interface Table {
  fields: Array<Exclude<Field, 'sub'>>
  combos: Map<string, unknown>
  nextCombo: number
  /** subject → combo id → its rows in list order */
  rows: Map<string, Map<number, Entry[]>>
}

/** One alternative, compiled: the table its rows are found in and where each key value comes from. */
interface Lookup {
  alternative: Alternative
  pins: Pin[]
  table: Table
}

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

const bySeq = (a: Entry, b: Entry): number => a.seq - b.seq

const sameRow = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((v, i) => v === b[i])

/** Where a pin's value comes from, for one request. */
const valueOf = (pin: Pin, request: readonly string[]): string => (pin.from === 'literal' ? pin.value : (request[POSITION[pin.field]] as string))

/** The id of a combination of values; undefined when no row has it and `create` is false. */
function comboId(table: Table, values: readonly string[], create: boolean): number | undefined {
  if (values.length === 0) return 0
  let level = table.combos
  for (let i = 0; i < values.length - 1; i++) {
    let next = level.get(values[i] as string) as Map<string, unknown> | undefined
    if (next === undefined) {
      if (!create) return undefined
      next = new Map()
      level.set(values[i] as string, next)
    }
    level = next
  }
  const last = values[values.length - 1] as string
  let id = level.get(last) as number | undefined
  if (id === undefined && create) {
    id = table.nextCombo++
    level.set(last, id)
  }
  return id
}

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
  private seq = 0
  /** Kept between questions: a question allocates no lists of its own. */
  private readonly found: Entry[] = []
  private readonly lists: Entry[][] = []
  private readonly rowsOut: Array<readonly string[]> = []

  constructor(alternatives: readonly Alternative[], rows: Iterable<readonly string[]>) {
    // Alternatives pinning the same fields share one table.
    this.lookups = alternatives.map((alternative) => {
      const fields = (['dom', 'obj', 'act'] as const).filter((f) => alternative.pins[f] !== undefined)
      let table = this.tables.find((t) => t.fields.join() === fields.join())
      if (table === undefined) {
        table = { fields, combos: new Map(), nextCombo: 1, rows: new Map() }
        this.tables.push(table)
      }
      return { alternative, pins: fields.map((f) => alternative.pins[f] as Pin), table }
    })
    for (const row of rows) this.add(row)
  }

  private static listOf(table: Table, row: readonly string[], create: boolean): Entry[] | undefined {
    const sub = row[0] ?? ''
    const id = comboId(
      table,
      table.fields.map((f) => row[POSITION[f]] ?? ''),
      create,
    )
    if (id === undefined) return undefined
    let bySub = table.rows.get(sub)
    if (bySub === undefined) {
      if (!create) return undefined
      bySub = new Map()
      table.rows.set(sub, bySub)
    }
    let list = bySub.get(id)
    if (list === undefined && create) {
      list = []
      bySub.set(id, list)
    }
    return list
  }

  /** A row appended to the model's list. */
  add(row: readonly string[]): void {
    const entry: Entry = { seq: this.seq++, row }
    for (const table of this.tables) {
      const list = CandidateIndex.listOf(table, row, true) as Entry[]
      list.push(entry)
      if (list.length === 1) this.subjectsAtRow(table, row).add(row[0] ?? '')
    }
  }

  /** A row taken out of the model's list (the others keep their order). */
  remove(row: readonly string[]): void {
    for (const table of this.tables) {
      const list = CandidateIndex.listOf(table, row, false)
      const at = list?.findIndex((e) => sameRow(e.row, row)) ?? -1
      if (list === undefined || at < 0) continue
      list.splice(at, 1)
      if (list.length === 0) {
        this.subjectsAtRow(table, row).delete(row[0] ?? '')
        const bySub = table.rows.get(row[0] ?? '')
        for (const [id, l] of bySub ?? []) if (l === list) bySub?.delete(id)
        if (bySub?.size === 0) table.rows.delete(row[0] ?? '')
      }
    }
  }

  /** Whether the list holds this row. */
  has(row: readonly string[]): boolean {
    const table = this.tables[0]
    return table !== undefined && CandidateIndex.listOf(table, row, false)?.some((e) => sameRow(e.row, row)) === true
  }

  /**
   * The rows `request` (sub, dom, obj, act) may match, in list order:
   * per alternative the requester's rows and, for a `g` tie, those of the
   * roles `links` says it reaches in the tie's domain (in any domain when
   * the tie's domain is not a request field or a literal). The array is
   * reused by the next question: read it before asking again.
   */
  candidates(request: readonly string[], links: RoleLinks): ReadonlyArray<readonly string[]> {
    const { found, lists, rowsOut } = this
    found.length = 0
    lists.length = 0
    rowsOut.length = 0
    const sub = request[0] as string
    for (let a = 0; a < this.lookups.length; a++) {
      const { alternative, pins, table } = this.lookups[a] as Lookup
      const id = CandidateIndex.requestCombo(table, pins, request)
      if (id === undefined) continue
      const bySub = table.rows
      this.collect(bySub, sub, id)
      const tie = alternative.subject
      if (tie.kind === 'exact') continue
      if (tie.domain !== 'any') {
        const domain = tie.domain.from === 'literal' ? tie.domain.value : (request[POSITION[tie.domain.field]] as string)
        const roles = links.rolesReached(sub, domain)
        for (let i = 0; i < roles.length; i++) this.collect(bySub, roles[i] as string, id)
      } else {
        for (const domain of links.linkDomains()) for (const role of links.rolesReached(sub, domain)) this.collect(bySub, role, id)
      }
    }
    if (lists.length === 1) {
      const list = lists[0] as Entry[]
      for (let i = 0; i < list.length; i++) rowsOut.push((list[i] as Entry).row)
      return rowsOut
    }
    // Rows of several tables may be the same row: each once.
    const seen = this.tables.length > 1 ? new Set<number>() : null
    for (const list of lists) {
      for (const entry of list) {
        if (seen !== null) {
          if (seen.has(entry.seq)) continue
          seen.add(entry.seq)
        }
        found.push(entry)
      }
    }
    if (lists.length > 1) found.sort(bySeq)
    for (let i = 0; i < found.length; i++) rowsOut.push((found[i] as Entry).row)
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

  private collect(bySub: Table['rows'], sub: string, id: number): void {
    const list = bySub.get(sub)?.get(id)
    // Two alternatives may ask for the same list (the same subject and values): it counts once.
    if (list !== undefined && !this.lists.includes(list)) this.lists.push(list)
  }

  /** Per table: combination id → the subjects having rows at it (the reverse of `rows`, for "who may hold"). */
  private readonly subjectsByCombo = new Map<Table, Map<number, Set<string>>>()

  private subjectsAtRow(table: Table, row: readonly string[]): Set<string> {
    const id = comboId(
      table,
      table.fields.map((f) => row[POSITION[f]] ?? ''),
      true,
    ) as number
    const byCombo = this.subjectsByCombo.get(table) ?? new Map<number, Set<string>>()
    this.subjectsByCombo.set(table, byCombo)
    const subjects = byCombo.get(id) ?? new Set<string>()
    byCombo.set(id, subjects)
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
