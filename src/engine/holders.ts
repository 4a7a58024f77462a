import type { Account } from '../domain/principals.js'
import type { PermissionEngine, Subject } from './engine.js'
import { isRootAccount, isRootSubRole } from '../domain/root.js'

/** How a holder holds the pair: a root sub-role, its own override, or a grant to a role it reaches. */
export type HolderVia = 'root' | 'role' | 'user'

export interface Holder {
  user_id: string
  email: string
  sub_role_code: string
  via: HolderVia
}

/** What "who holds" needs of the accounts in memory. */
export interface AccountSource {
  peek(id: string): Account | undefined
  withSubRole(code: string): Iterable<Account>
  subRoles(): Iterable<string>
  all(): Iterable<Account>
}

/**
 * Every account for which `engine.decide(account, domain, obj, act)` is
 * true (and `visible` holds), in no particular order. The candidates come
 * from memory: root users (system-owner root users everywhere, merchant root
 * users in their merchant), and the subjects with an allow row of the pair
 * in the domain or in `global` together with every member reaching them by
 * `g` links in either. Each candidate is then decided as a check decides, so
 * the list is exactly the users a check allows. The decision path says who
 * may hold the pair (engine.possibleHolders): an edited model of the
 * candidates family, the subjects of the rows the question may match and
 * the members reaching them. Any other model, or one that allows when no
 * row matches, may reach users the rows do not show: then every account
 * is decided.
 */
export function permissionHolders(
  engine: PermissionEngine,
  accounts: AccountSource,
  obj: string,
  act: string,
  domain: string,
  visible: (account: Account) => boolean = () => true,
): Holder[] {
  if (!engine.isActive(obj, act)) return []
  const holders: Holder[] = []
  /**
   * Each account is decided through one Subject filled in here, with the id
   * as the policy's rows spell it (`id`): the same value as the account's,
   * and the very string the index's maps hold, so their look-ups compare no
   * text (tens of thousands of candidates: the accounts lie all over the heap).
   */
  const subject: Subject = { id: '', principal_type: 'merchant', merchant_id: null, sub_role_code: '', status: 'active' }
  const consider = (account: Account, via: HolderVia, id = account.id) => {
    if (!visible(account)) return
    subject.id = id
    subject.principal_type = account.principal_type
    subject.merchant_id = account.merchant_id
    subject.sub_role_code = account.sub_role_code
    subject.status = account.status
    if (engine.decide(subject, domain, obj, act)) holders.push({ user_id: account.id, email: account.email, sub_role_code: account.sub_role_code, via })
  }
  for (const code of accounts.subRoles()) {
    if (!isRootSubRole(engine, code)) continue
    for (const account of accounts.withSubRole(code)) consider(account, 'root')
  }
  // Whose own allow row of the pair reaches the question: those hold it as a user.
  const own = new Set(engine.policy.allowersOf(obj, act, domain))
  const candidates = engine.possibleHolders(domain, obj, act)
  if (candidates === null) {
    for (const account of accounts.all()) if (!isRootAccount(engine, account)) consider(account, own.has(account.id) ? 'user' : 'role')
  } else {
    for (const id of candidates) {
      const account = accounts.peek(id)
      // A row spelling the id otherwise (case) is not the account's: the check would not read it.
      if (account !== undefined && account.id === id && !isRootAccount(engine, account)) consider(account, own.has(id) ? 'user' : 'role', id)
    }
  }
  return holders
}

/** The lists kept per engine, and the holders they may hold in all (about 80 bytes each). */
const CACHED_LISTS = 16
const CACHED_HOLDERS = 250_000

interface CachedList {
  generation: number
  accounts: number
  holders: Holder[]
  sorted: boolean
}

const caches = new WeakMap<PermissionEngine, Map<string, CachedList>>()

export interface HoldersQuestion {
  obj: string
  act: string
  domain: string
  /** Who may be listed; `scope` names it (the same scope, the same accounts). */
  scope: string
  visible: (account: Account) => boolean
}

/**
 * One page of the holders, by e-mail, and how many there are. The list is
 * worked out once (see permissionHolders) and kept while neither the policy
 * (engine.generation) nor the accounts (accounts.version) change, so the
 * next pages are a slice: the first answer selects its page without sorting
 * the rest, and a later one sorts the kept list once.
 */
export function holdersPage(
  engine: PermissionEngine,
  accounts: AccountSource & { readonly version: number },
  question: HoldersQuestion,
  start: number,
  count: number,
): { items: Holder[]; total: number } {
  let cache = caches.get(engine)
  if (cache === undefined) {
    cache = new Map()
    caches.set(engine, cache)
  }
  const key = `${question.obj}\u0000${question.act}\u0000${question.domain}\u0000${question.scope}`
  const generation = engine.generation
  const version = accounts.version
  const kept = cache.get(key)
  cache.delete(key)
  if (kept !== undefined && kept.generation === generation && kept.accounts === version) {
    cache.set(key, kept)
    if (!kept.sorted) {
      kept.holders.sort(holderOrder)
      kept.sorted = true
    }
    return { items: kept.holders.slice(start, start + count), total: kept.holders.length }
  }
  const holders = permissionHolders(engine, accounts, question.obj, question.act, question.domain, question.visible)
  const items = sortedPage(holders, start, count, holderOrder)
  cache.set(key, { generation, accounts: version, holders, sorted: false })
  let total = 0
  for (const list of cache.values()) total += list.holders.length
  // Oldest first: drop lists until the bounds hold (the one just made stays).
  for (const [name, list] of cache) {
    if (cache.size <= CACHED_LISTS && total <= CACHED_HOLDERS) break
    if (name === key) continue
    cache.delete(name)
    total -= list.holders.length
  }
  return { items, total: holders.length }
}

/** By e-mail, then id: the order holders are listed in. */
export const holderOrder = (a: Holder, b: Holder): number =>
  a.email < b.email ? -1 : a.email > b.email ? 1 : a.user_id < b.user_id ? -1 : a.user_id > b.user_id ? 1 : 0

/**
 * The items at positions [start, start + count) of `items` sorted by
 * `compare`, without sorting the rest: two selections (linear on average)
 * and a sort of the page. `items` is reordered.
 */
export function sortedPage<T>(items: T[], start: number, count: number, compare: (a: T, b: T) => number): T[] {
  if (start >= items.length) return []
  const end = Math.min(items.length, start + count)
  select(items, start, 0, items.length, compare)
  if (end < items.length) select(items, end, start, items.length, compare)
  return items.slice(start, end).sort(compare)
}

/** Puts the k-th smallest of items[lo, hi) at k, the smaller before it and the larger after (three-way quickselect). */
function select<T>(items: T[], k: number, lo: number, hi: number, compare: (a: T, b: T) => number): void {
  const swap = (i: number, j: number) => {
    const kept = items[i] as T
    items[i] = items[j] as T
    items[j] = kept
  }
  while (hi - lo > 1) {
    const pivot = items[lo + Math.floor(Math.random() * (hi - lo))] as T
    let lt = lo
    let i = lo
    let gt = hi
    while (i < gt) {
      const c = compare(items[i] as T, pivot)
      if (c < 0) swap(lt++, i++)
      else if (c > 0) swap(i, --gt)
      else i++
    }
    if (k < lt) hi = lt
    else if (k >= gt) lo = gt
    else return
  }
}
