/** How many trailing characters of a credential key the map: they lie in the token's signature. */
const KEY_LENGTH = 32

/**
 * Verified token claims kept by the exact `Authorization` header that carried
 * them, until the token expires, so the gateway's repeated calls skip
 * decoding and signature checks. The map is keyed by the header's last
 * characters (the signature's), so a look-up hashes a few dozen characters
 * instead of the whole token, and a hit is confirmed against the whole header.
 * Bounded: the oldest entry leaves first when it is full.
 */
export class VerifiedTokenCache<T extends { exp?: unknown }> {
  private readonly entries = new Map<string, { credential: string; claims: T; expiresAt: number }>()

  constructor(
    private readonly capacity = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(credential: string): T | undefined {
    const key = credential.slice(-KEY_LENGTH)
    const entry = this.entries.get(key)
    if (entry === undefined || entry.credential !== credential) return undefined
    if (this.now() >= entry.expiresAt) {
      this.entries.delete(key)
      return undefined
    }
    return entry.claims
  }

  /** Only tokens with an expiry are kept, and never past it. */
  set(credential: string, claims: T): void {
    if (typeof claims.exp !== 'number') return
    const key = credential.slice(-KEY_LENGTH)
    if (!this.entries.has(key) && this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next()
      if (oldest.done !== true) this.entries.delete(oldest.value)
    }
    this.entries.set(key, { credential, claims, expiresAt: claims.exp * 1000 })
  }

  get size(): number {
    return this.entries.size
  }
}
