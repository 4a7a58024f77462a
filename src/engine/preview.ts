import type { RuleChange } from './decisionIndex.js'
import type { PermissionEngine } from './engine.js'
import type { Reached } from './decisionPath.js'
import type { AccountSource } from './holders.js'

/** Users listed in a preview at most. */
const PREVIEW_SAMPLE = 50

export interface PairInDomain {
  obj: string
  act: string
  domain: string
}

export interface PreviewUser {
  user_id: string
  email: string
  gains: PairInDomain[]
  loses: PairInDomain[]
}

export interface AccessPreview {
  users_gaining: number
  users_losing: number
  /** At most PREVIEW_SAMPLE of the users whose decisions change, by e-mail. */
  sample: PreviewUser[]
}

export type { Reached } from './decisionPath.js'

/**
 * The users a change of the role's row in `domain` reaches, as the decision
 * path reads its rows. With the shipped model: those reaching the role by
 * `g` links in that domain, decided there; for a `global` row, those
 * reaching it in any domain, each decided in the domain of its link. With
 * another model of the family the matcher says where a row counts, not the
 * link: every user reaching the role by links in any domain, each decided
 * in its home domain; outside the family, every user.
 */
export function roleReach(engine: PermissionEngine, accounts: Pick<AccountSource, 'peek' | 'all'>, role: string, domain: string): Reached[] {
  return engine.roleReach(accounts, role, domain)
}

/**
 * Each reached user decided before (engine.decide) and after (the same rules
 * with `changes` laid over the policy, which is left as it is): users whose
 * decision of the pair goes from false to true gain it, from true to false lose it.
 */
export function previewChanges(engine: PermissionEngine, reached: readonly Reached[], obj: string, act: string, changes: readonly RuleChange[]): AccessPreview {
  return mergePreviews([previewUsers(engine, reached, obj, act, changes)])
}

/** previewChanges' users, every one of them (not yet counted or sampled). */
export function previewUsers(engine: PermissionEngine, reached: readonly Reached[], obj: string, act: string, changes: readonly RuleChange[]): PreviewUser[] {
  const changed = new Map<string, PreviewUser>()
  if (changes.length > 0) {
    for (const { account, domain } of reached) {
      const before = engine.decide(account, domain, obj, act)
      if (engine.decideAfter(account, domain, obj, act, changes) === before) continue
      let user = changed.get(account.id)
      if (user === undefined) {
        user = { user_id: account.id, email: account.email, gains: [], loses: [] }
        changed.set(account.id, user)
      }
      ;(before ? user.loses : user.gains).push({ obj, act, domain })
    }
  }
  return [...changed.values()]
}

/** One preview of the users of several pairs' previews: a user's gains and losses joined, counted once, sampled by e-mail. */
export function mergePreviews(parts: ReadonlyArray<readonly PreviewUser[]>): AccessPreview {
  const byId = new Map<string, PreviewUser>()
  for (const part of parts) {
    for (const u of part) {
      const seen = byId.get(u.user_id)
      if (seen === undefined) byId.set(u.user_id, { ...u, gains: [...u.gains], loses: [...u.loses] })
      else {
        seen.gains.push(...u.gains)
        seen.loses.push(...u.loses)
      }
    }
  }
  const users = [...byId.values()]
  users.sort((a, b) => (a.email < b.email ? -1 : a.email > b.email ? 1 : a.user_id < b.user_id ? -1 : 1))
  return {
    users_gaining: users.filter((u) => u.gains.length > 0).length,
    users_losing: users.filter((u) => u.loses.length > 0).length,
    sample: users.slice(0, PREVIEW_SAMPLE),
  }
}
