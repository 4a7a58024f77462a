/** Rows filed per turn of the event loop by background work: about 10 ms of it, so checks in between wait no longer. */
export const ROWS_PER_TURN = 25_000

/**
 * Background filing, a slice per turn of the event loop: `fileSome(count)`
 * files up to `count` more rows and answers whether nothing is left to do
 * (done, or no longer wanted). A load is ready without the work; whatever
 * needs it first finishes it at once.
 */
export function inSlices(fileSome: (count: number) => boolean): void {
  const slice = (): void => {
    if (!fileSome(ROWS_PER_TURN)) setImmediate(slice)
  }
  setImmediate(slice)
}
