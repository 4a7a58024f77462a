/** A small seeded generator (mulberry32): the engine tests draw the same worlds and writes on every run. */
export function random(seed: number) {
  let a = seed
  const next = () => {
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  const below = (n: number): number => Math.floor(next() * n)
  const pick = <T>(values: readonly T[]): T => values[below(values.length)] as T
  return { next, below, pick }
}
