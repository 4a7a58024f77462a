/**
 * Compilation put off from a route's declaration to its first use. Ajv and
 * fast-json-stringify generate code for every route's schemas when Fastify
 * gets ready: about half a second of each start (docs/performance.md), spent
 * before the service answers anything. Deferred, each one is compiled by the
 * first request that needs it or by drain(), which the runner starts once
 * the server listens, whichever comes first.
 */
export class DeferredCompiles {
  private readonly waiting = new Set<() => unknown>()

  /** A getter of `make()`'s result, made once: on the getter's first call or by drain(). */
  defer<T>(make: () => T): () => T {
    let made: { value: T } | null = null
    const get = (): T => {
      if (made === null) {
        made = { value: make() }
        this.waiting.delete(get)
      }
      return made.value
    }
    this.waiting.add(get)
    return get
  }

  /** How many are still waiting. */
  get size(): number {
    return this.waiting.size
  }

  /** Makes every one still waiting, one per turn of the event loop: a request arriving meanwhile waits for one at most. */
  async drain(): Promise<void> {
    for (const get of [...this.waiting]) {
      get()
      await new Promise((resolve) => setImmediate(resolve))
    }
  }
}
