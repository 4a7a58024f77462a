/** An override's identity: one per user, domain and pair, whatever its effect. */
const keyOf = (values: readonly string[]): string => `${values[0]}\u0000${values[1]}\u0000${values[2]}\u0000${values[3]}`

interface Expiry {
  values: readonly string[]
  at: number
}

/**
 * The instants at which loaded overrides stop counting, soonest first. A
 * min-heap of (instant, key) whose entries may be outdated (the override was
 * replaced or removed since); the map says which instant is current, so an
 * outdated entry is dropped when it reaches the top.
 */
export class OverrideExpiries {
  private readonly byKey = new Map<string, Expiry>()
  private readonly heap: Array<{ at: number; key: string }> = []

  get size(): number {
    return this.byKey.size
  }

  /** The override `values` (a p row) stops counting at `at`. */
  set(values: readonly string[], at: number): void {
    const key = keyOf(values)
    this.byKey.set(key, { values, at })
    this.push({ at, key })
  }

  /** The override `values` no longer expires (removed, or replaced by one that does not). */
  clear(values: readonly string[]): void {
    const key = keyOf(values)
    if (this.byKey.get(key)?.values[4] === values[4]) this.byKey.delete(key)
  }

  /** When the override of this user, domain and pair stops counting; null when it does not expire. */
  at(subject: string, domain: string, obj: string, act: string): number | null {
    return this.byKey.get(keyOf([subject, domain, obj, act]))?.at ?? null
  }

  /** The soonest instant still current, or null. */
  next(): number | null {
    for (;;) {
      const top = this.heap[0]
      if (top === undefined) return null
      if (this.byKey.get(top.key)?.at === top.at) return top.at
      this.pop()
    }
  }

  /** Takes out every override whose instant is at or before `now`, and returns their rows. */
  takeDue(now: number): Array<readonly string[]> {
    const due: Array<readonly string[]> = []
    for (let at = this.next(); at !== null && at <= now; at = this.next()) {
      const top = this.pop()
      const expiry = this.byKey.get(top.key)
      if (expiry === undefined) continue
      this.byKey.delete(top.key)
      due.push(expiry.values)
    }
    return due
  }

  private push(entry: { at: number; key: string }): void {
    const heap = this.heap
    heap.push(entry)
    let i = heap.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if ((heap[parent] as { at: number }).at <= entry.at) break
      heap[i] = heap[parent] as { at: number; key: string }
      i = parent
    }
    heap[i] = entry
  }

  private pop(): { at: number; key: string } {
    const heap = this.heap
    const top = heap[0] as { at: number; key: string }
    const last = heap.pop() as { at: number; key: string }
    if (heap.length === 0) return top
    let i = 0
    for (;;) {
      const left = 2 * i + 1
      if (left >= heap.length) break
      const right = left + 1
      const child = right < heap.length && (heap[right] as { at: number }).at < (heap[left] as { at: number }).at ? right : left
      if ((heap[child] as { at: number }).at >= last.at) break
      heap[i] = heap[child] as { at: number; key: string }
      i = child
    }
    heap[i] = last
    return top
  }
}
