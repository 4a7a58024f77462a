/**
 * Verified token claims kept by the token's exact text until the token
 * expires, so the gateway's repeated calls skip decoding and signature checks.
 * Bounded: the oldest entry leaves first when it is full.
 */
export class VerifiedTokenCache<T extends { exp?: unknown }> {
  private readonly entries = new Map<string, { claims: T; expiresAt: number }>()

  constructor(
    private readonly capacity = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(token: string): T | undefined {
    const entry = this.entries.get(token)
    if (entry === undefined) return undefined
    if (this.now() >= entry.expiresAt) {
      this.entries.delete(token)
      return undefined
    }
    return entry.claims
  }

  /** Only tokens with an expiry are kept, and never past it. */
  set(token: string, claims: T): void {
    if (typeof claims.exp !== 'number') return
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next()
      if (oldest.done !== true) this.entries.delete(oldest.value)
    }
    this.entries.set(token, { claims, expiresAt: claims.exp * 1000 })
  }

  get size(): number {
    return this.entries.size
  }
}
