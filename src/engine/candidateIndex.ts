import type { Alternative, Field, Pin } from './matcherAnalysis.js'

/** The policy fields a p row is keyed on, in the row's order (p = sub, dom, obj, act, eft). */
const POSITION: Record<Field, number> = { sub: 0, dom: 1, obj: 2, act: 3 }

/** A row and its place in the model's list: Casbin appends rows and removes them keeping the others' order, so places compare as the list does. */
interface Entry {
  seq: number
  row: readonly string[]
}

/** One alternative, compiled: the pinned fields besides the subject, and the key of the table its rows are found in. */
interface Lookup {
  alternative: Alternative
  fields: Array<Exclude<Field, 'sub'>>
  table: Map<string, Entry[]>
}

const sameRow = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((v, i) => v === b[i])

/** Where a pin's value comes from, for one request. */
const valueOf = (pin: Pin, request: readonly string[]): string => (pin.from === 'literal' ? pin.value : (request[POSITION[pin.field]] as string))

/**
 * The p rows a question can match, by the fields the matcher's alternatives
 * pin: for each alternative, a hash table keyed on the subject and its
 * pinned fields. A question looks up, per alternative, the requester and
 * every role it may reach, and gets back a superset of the rows Casbin's
 * matcher accepts, in the model list's order, so that Casbin's own matcher
 * and effect evaluated over them alone decide as over the whole list.
 */
export class CandidateIndex {
  private readonly lookups: Lookup[]
  private seq = 0

  constructor(alternatives: readonly Alternative[], rows: Iterable<readonly string[]>) {
    // Alternatives pinning the same fields share one table.
    const tables = new Map<string, Map<string, Entry[]>>()
    this.lookups = alternatives.map((alternative) => {
      const fields = (['dom', 'obj', 'act'] as const).filter((f) => alternative.pins[f] !== undefined)
      const name = fields.join(',')
      let table = tables.get(name)
      if (table === undefined) {
        table = new Map()
        tables.set(name, table)
      }
      return { alternative, fields, table }
    })
    this.tables = [...new Map(this.lookups.map((l) => [l.table, l.fields])).entries()]
    for (const row of rows) this.add(row)
  }

  /** Each distinct table once, with the fields of its key. */
  private readonly tables: Array<[Map<string, Entry[]>, Array<Exclude<Field, 'sub'>>]>

  private static key(sub: string, values: readonly string[]): string {
    return values.length === 0 ? sub : `${sub}\u0000${values.join('\u0000')}`
  }

  /** A row appended to the model's list. */
  add(row: readonly string[]): void {
    const entry: Entry = { seq: this.seq++, row }
    for (const [table, fields] of this.tables) {
      const key = CandidateIndex.key(row[0] ?? '', fields.map((f) => row[POSITION[f]] ?? ''))
      const list = table.get(key)
      if (list === undefined) table.set(key, [entry])
      else list.push(entry)
    }
  }

  /** A row taken out of the model's list (the others keep their order). */
  remove(row: readonly string[]): void {
    for (const [table, fields] of this.tables) {
      const key = CandidateIndex.key(row[0] ?? '', fields.map((f) => row[POSITION[f]] ?? ''))
      const list = table.get(key)
      const at = list?.findIndex((e) => sameRow(e.row, row)) ?? -1
      if (list === undefined || at < 0) continue
      list.splice(at, 1)
      if (list.length === 0) table.delete(key)
    }
  }

  /**
   * The rows `request` (sub, dom, obj, act) may match, in list order.
   * `subjects(alternative)` gives the subjects an alternative's tie admits:
   * the requester, and for a `g` tie every role it may reach.
   */
  candidates(request: readonly string[], subjects: (alternative: Alternative) => Iterable<string>): Array<readonly string[]> {
    const found: Entry[] = []
    const seen = new Set<number>()
    let lists = 0
    for (const { alternative, fields, table } of this.lookups) {
      const values = fields.map((f) => valueOf(alternative.pins[f] as Pin, request))
      for (const sub of subjects(alternative)) {
        const list = table.get(CandidateIndex.key(sub, values))
        if (list === undefined) continue
        lists++
        for (const entry of list) {
          if (seen.has(entry.seq)) continue
          seen.add(entry.seq)
          found.push(entry)
        }
      }
    }
    if (lists > 1) found.sort((a, b) => a.seq - b.seq)
    return found.map((e) => e.row)
  }
}
