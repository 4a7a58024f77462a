/**
 * A first-in first-out queue of items with their arrival numbers, taken
 * from the front by moving an index (no `shift()`, which copies the array),
 * compacted once the taken part is large.
 */
export class Fifo<T> {
  private items: T[] = []
  private seqs: number[] = []
  private head = 0

  get length(): number {
    return this.items.length - this.head
  }

  push(item: T, seq: number): void {
    this.items.push(item)
    this.seqs.push(seq)
  }

  /** The arrival number of the front item; Infinity when empty. */
  frontSeq(): number {
    return this.head < this.items.length ? (this.seqs[this.head] as number) : Number.POSITIVE_INFINITY
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head] as T
    this.head++
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.seqs = this.seqs.slice(this.head)
      this.head = 0
    }
    return item
  }

  /** Puts items back at the front, in their order (a batch a sink did not take). */
  unshiftAll(items: readonly T[], seqs: readonly number[]): void {
    this.items = [...items, ...this.items.slice(this.head)]
    this.seqs = [...seqs, ...this.seqs.slice(this.head)]
    this.head = 0
  }

  clear(): void {
    this.items = []
    this.seqs = []
    this.head = 0
  }
}
