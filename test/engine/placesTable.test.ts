import t from 'tap'
import { PlacesTable, type Places } from '../../src/engine/placesTable.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'
import { random } from '../support/seededRandom.js'

onceOnPGlite('the places table in memory')

const key = (subject: number, combo: number): string => `${subject}/${combo}`

/** The table's keys and values, as a Map of "subject/combo" → places, read through forEachKey and get. */
function contents(table: PlacesTable): Map<string, Places | undefined> {
  const out = new Map<string, Places | undefined>()
  table.forEachKey((subject, combo) => out.set(key(subject, combo), table.get(subject, combo)))
  return out
}

t.test('random sets and deletes give what a Map gives, through growth and runs that wrap around the end', async (t) => {
  for (const seed of [1, 2, 3]) {
    const { below } = random(seed)
    const table = new PlacesTable()
    const expected = new Map<string, Places>()
    let mismatches = 0
    // Keys from a small space, so sets land on held keys and deletes find them; up to 6,000 keys grow each of the table's parts several times.
    for (let op = 0; op < 40_000; op++) {
      const subject = below(120)
      const combo = below(50)
      const roll = below(10)
      if (roll < 5) {
        const places: Places = below(4) === 0 ? [op, op + 1] : op
        table.set(subject, combo, places)
        expected.set(key(subject, combo), places)
      } else if (roll < 8) {
        table.delete(subject, combo)
        expected.delete(key(subject, combo))
      } else if (table.get(subject, combo) !== expected.get(key(subject, combo))) {
        mismatches++
      }
      if (table.size !== expected.size) mismatches++
    }
    t.equal(mismatches, 0, `seed ${seed}: every get and size as the Map's`)
    t.same(contents(table), expected, `seed ${seed}: every key held, and no other`)
    t.ok(expected.size > 1000, `seed ${seed}: the table held ${expected.size} keys at the end`)
    const lists = [...expected.values()].filter((places) => typeof places !== 'number').length
    t.equal(table.listsHeld, lists, `seed ${seed}: a list replaced or deleted is given up (${lists} held)`)
  }
})

t.test('a key deleted from the middle of a run leaves the keys after it reachable', async (t) => {
  const table = new PlacesTable()
  // Enough keys that runs of neighbouring slots form at 60% fill.
  for (let combo = 0; combo < 600; combo++) table.set(7, combo, combo)
  for (let combo = 0; combo < 600; combo += 2) table.delete(7, combo)
  let found = 0
  for (let combo = 1; combo < 600; combo += 2) if (table.get(7, combo) === combo) found++
  t.equal(found, 300, 'every odd combination is still found')
  t.equal(table.get(7, 0), undefined, 'a deleted key is gone')
  t.equal(table.size, 300)
  table.clear()
  t.equal(table.size, 0)
  t.equal(table.get(7, 1), undefined, 'clear() forgets every key')
})
