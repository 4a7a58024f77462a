import { mixHash } from './probingTable.js'

/** Whether two rule rows hold the same values (a shorter row with the same start is another row). */
export function sameRow(row: readonly string[], values: readonly string[]): boolean {
  if (row.length !== values.length) return false
  for (let f = 0; f < values.length; f++) if (row[f] !== values[f]) return false
  return true
}

/** A row's hash for the probing table: FNV-1a over every field with a separator between fields, then mixed. */
export function hashRow(values: readonly string[]): number {
  let h = 0x811c9dc5
  for (let f = 0; f < values.length; f++) {
    const value = values[f] as string
    for (let i = 0; i < value.length; i++) h = Math.imul(h ^ value.charCodeAt(i), 0x01000193)
    h = Math.imul(h ^ 0xffff, 0x01000193)
  }
  return mixHash(h)
}
