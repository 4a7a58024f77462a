const NO_MEMBERS: readonly string[] = Object.freeze([])

/**
 * The decision index's rows read backwards, for "who holds this pair" and
 * "whom does a change of this role reach": per pair id, every subject with
 * an allow row of it and in how many domains; per domain, each role's
 * members. Counting per pair rather than keeping a set per pair and domain
 * costs about a byte per rule instead of some forty: a question then tests
 * the bits of each subject holding the pair somewhere, still far fewer
 * than the users. A role with one member in a domain (common: one per
 * merchant) keeps the member's id, not an array. The decision index keeps
 * it in step with its rows.
 */
export class ReverseIndex {
  private readonly allowers: Array<Map<string, number> | undefined> = []
  private readonly members = new Map<string, Map<string, string | string[]>>()

  /** `sub` gained an allow row of pair `id` in one more domain. */
  allowAdded(id: number, sub: string): void {
    let subjects = this.allowers[id]
    if (subjects === undefined) {
      subjects = new Map()
      this.allowers[id] = subjects
    }
    subjects.set(sub, (subjects.get(sub) ?? 0) + 1)
  }

  /** `sub` lost its allow row of pair `id` in one domain. */
  allowRemoved(id: number, sub: string): void {
    const subjects = this.allowers[id]
    const domains = subjects?.get(sub) ?? 0
    if (domains > 1) subjects?.set(sub, domains - 1)
    else subjects?.delete(sub)
  }

  /** Every subject with an allow row of pair `id` in some domain. */
  subjectsAllowing(id: number): Iterable<string> {
    return this.allowers[id]?.keys() ?? NO_MEMBERS
  }

  linkAdded(member: string, role: string, domain: string): void {
    let byRole = this.members.get(domain)
    if (byRole === undefined) {
      byRole = new Map()
      this.members.set(domain, byRole)
    }
    const assigned = byRole.get(role)
    if (assigned === undefined) byRole.set(role, member)
    else if (typeof assigned === 'string') byRole.set(role, [assigned, member])
    // A short list is copied at its exact length: pushing would leave room for some twenty more ids in each.
    else if (assigned.length < 16) byRole.set(role, [...assigned, member])
    else assigned.push(member)
  }

  linkRemoved(member: string, role: string, domain: string): void {
    const byRole = this.members.get(domain)
    const assigned = byRole?.get(role)
    if (byRole === undefined || assigned === undefined) return
    if (assigned === member) byRole.delete(role)
    else if (typeof assigned !== 'string') {
      // Order does not matter: the last member takes the removed one's place.
      const at = assigned.indexOf(member)
      if (at >= 0) {
        const last = assigned.pop() as string
        if (at < assigned.length) assigned[at] = last
        if (assigned.length === 1) byRole.set(role, assigned[0] as string)
      }
    }
    if (byRole.size === 0) this.members.delete(domain)
  }

  /**
   * Adds to `into` every member reaching one of `roles` by `g` links in
   * `domain` (the reverse of rolesReached), the roles themselves included.
   */
  membersReaching(roles: Iterable<string>, domain: string, into: Set<string>): Set<string> {
    const byRole = this.members.get(domain)
    // Only members that have members of their own (roles) are walked on, each once.
    const walked = new Set<string>()
    const frontier: string[] = []
    for (const role of roles) {
      into.add(role)
      if (byRole?.has(role) !== true || walked.has(role)) continue
      walked.add(role)
      frontier.push(role)
    }
    // Every member is visited, whatever the depth: a superset of what the
    // ten-link limit reaches, which callers filter with the decision.
    while (byRole !== undefined && frontier.length > 0) {
      const assigned = byRole.get(frontier.pop() as string) ?? NO_MEMBERS
      for (const member of typeof assigned === 'string' ? [assigned] : assigned) {
        into.add(member)
        if (walked.has(member) || !byRole.has(member)) continue
        walked.add(member)
        frontier.push(member)
      }
    }
    return into
  }

  /** The domains that have `g` links. */
  linkDomains(): IterableIterator<string> {
    return this.members.keys()
  }
}
