import type { Account } from '../domain/principals.js'
import { clientAddress, type ProxyTrust } from '../domain/clientIp.js'
import { truncateAddress, type AddressPrefix } from '../domain/addressPrefix.js'
import type { DecisionLogMode } from '../domain/decisionLogSettings.js'
import { REASON_NAMES, allows, namesARow, type ReasonCode } from '../engine/explain.js'
import type { DecisionEvent, DecisionReason, DecisionSource, ShadowComparer } from './event.js'
import type { SinkPipeline } from './pipeline.js'


export interface RecorderSettings {
  mode: DecisionLogMode
  /** The fraction of allows kept under `all`. */
  allowSample: number
  /** Keep the original request's query in `path` (verify, ext_authz). */
  includeQuery: boolean
  clientIpPrefix: AddressPrefix
  trustProxy: ProxyTrust
  /** This process's name in events. */
  replica: string
  /** The first 12 hex digits of the loaded model text's SHA-256. */
  modelId: string
}

/** What the deciding evaluation leaves besides its code: the row, read right after it. */
interface RuleSource {
  decidingRule(): string[] | null
}

/**
 * A reason beyond the evaluation's codes, a refusal made before any rule
 * was read: forward auth with no pair to ask about, or a policy that could
 * not be confirmed current.
 */
export type DecisionOutcome = ReasonCode | 'no_route' | 'stale_policy'

/**
 * A decision as the hot path hands it over: references to what the request
 * and the evaluation already hold, nothing formatted. Turned into an event
 * after the answer was written.
 */
interface Pending {
  source: DecisionSource
  id: string
  subject: Account
  caller: Account | null
  domain: string
  obj: string
  act: string
  outcome: DecisionOutcome
  rule: string[] | null
  requestId: string
  peer: string | undefined
  forwardedFor: string | undefined
  method: string | undefined
  path: string | undefined
}

/** Read once: the getter costs a call into the runtime, and a process's origin never moves. */
const TIME_ORIGIN = performance.timeOrigin

/**
 * The reasons no row decided, one object per kind shared by every event
 * that has it (nothing changes an event's reason once made): an event pays
 * for a reason object only when it names a row.
 */
const ROWLESS: Readonly<Record<DecisionReason['kind'], DecisionReason>> = Object.fromEntries(
  [...REASON_NAMES, 'no_route', 'stale_policy'].map((kind) => [kind, { kind }]),
) as Record<DecisionReason['kind'], DecisionReason>

/** The second the last event's time fell in, and its text up to the fraction (`…T12:34:56.`). */
let second = Number.NaN
let secondText = ''

const threeDigits = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : String(n))

/**
 * RFC 3339 in UTC with microseconds, from milliseconds since the epoch (with
 * a fraction). The date and time of day are formatted once per second, the
 * fraction by arithmetic: every event logged pays for its time.
 */
export function rfc3339Micros(ms: number): string {
  const whole = Math.floor(ms)
  const micros = Math.floor((ms - whole) * 1000)
  const s = Math.floor(whole / 1000)
  if (s !== second) {
    const iso = new Date(s * 1000).toISOString()
    secondText = iso.slice(0, iso.length - 4)
    second = s
  }
  return `${secondText}${threeDigits(whole - s * 1000)}${threeDigits(micros)}Z`
}

/**
 * The decision log's front: the gateway's routes ask wants() and, when it
 * says so, hand a decision to decided() right after its evaluation. The
 * event is built, compared with the shadow model, kept or sampled out and
 * handed to each sink's pipeline on a later turn of the event loop
 * (setImmediate, one turn for all the decisions of the turn before), so the
 * answer never waits for any of it.
 */
export class DecisionRecorder {
  private pending: Pending[] = []
  private at: number[] = []
  private revisions: number[] = []
  private scheduled = false
  private readonly active: boolean
  /** The last client address written, with the peer and `x-forwarded-for` it was read from (null: none yet). */
  private lastIp: string | null = null
  private lastPeer: string | undefined = undefined
  private lastForwardedFor: string | undefined = undefined
  /** wants()'s two answers, settled at start: the hot path asks for every decision. */
  private readonly wantsAllows: boolean
  private readonly wantsDenies: boolean

  constructor(
    private readonly settings: RecorderSettings,
    readonly pipelines: readonly SinkPipeline[],
    private readonly rules: RuleSource,
    private readonly revision: () => number,
    private readonly shadow: ShadowComparer | null = null,
  ) {
    this.active = settings.mode !== 'off' && pipelines.length > 0
    this.wantsAllows = shadow !== null || (this.active && settings.mode === 'all')
    this.wantsDenies = shadow !== null || this.active
  }

  /** Whether a decision with this answer is to be handed over (the shadow model asks about every one). */
  wants(allowed: boolean): boolean {
    return allowed ? this.wantsAllows : this.wantsDenies
  }

  /**
   * One decision, handed over right after its evaluation (the deciding
   * row is read here, before the next decision replaces it). `caller` is
   * who asked when it was about another user; `method` and `path` the
   * original request's, for verify and ext_authz.
   */
  decided(
    source: DecisionSource,
    id: string,
    subject: Account,
    caller: Account | null,
    domain: string,
    obj: string,
    act: string,
    outcome: DecisionOutcome,
    requestId: string,
    peer: string | undefined,
    forwardedFor: string | undefined,
    method?: string,
    path?: string,
  ): void {
    const rule = typeof outcome === 'number' && namesARow(outcome) ? this.rules.decidingRule() : null
    this.pending.push({ source, id, subject, caller, domain, obj, act, outcome, rule, requestId, peer, forwardedFor, method, path })
    this.at.push(TIME_ORIGIN + performance.now())
    this.revisions.push(this.revision())
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(() => this.flush())
    }
  }

  /** Builds the events of the decisions handed over so far and queues the kept ones for every sink. */
  flush(): void {
    this.scheduled = false
    const { pending, at, revisions } = this
    this.pending = []
    this.at = []
    this.revisions = []
    for (let i = 0; i < pending.length; i++) {
      const decision = pending[i] as Pending
      const { outcome } = decision
      const allowed = typeof outcome === 'number' && allows(outcome)
      const reason: DecisionReason =
        typeof outcome === 'string' ? ROWLESS[outcome] : decision.rule === null ? ROWLESS[REASON_NAMES[outcome]] : { kind: REASON_NAMES[outcome], rule: decision.rule }
      // A refusal made before any rule was read asked the live model nothing to compare.
      const shadow =
        this.shadow === null || typeof outcome === 'string'
          ? null
          : this.shadow.compare({ account: decision.subject, domain: decision.domain, obj: decision.obj, act: decision.act, allowed, reason }, decision.id)
      if (!this.keeps(allowed, shadow !== null)) continue
      const event = this.event(decision, allowed, reason, at[i] as number, revisions[i] as number)
      if (shadow !== null) event.shadow = shadow
      for (const pipeline of this.pipelines) pipeline.push(event)
    }
  }

  private keeps(allowed: boolean, disagreed: boolean): boolean {
    if (!this.active) return false
    if (disagreed || !allowed) return true
    const { mode, allowSample } = this.settings
    return mode === 'all' && (allowSample >= 1 || Math.random() < allowSample)
  }

  /** The event: exactly section 15's fields, and nothing read from a header but the client's address and the original method and path. */
  private event(decision: Pending, allowed: boolean, reason: DecisionReason, at: number, revision: number): DecisionEvent {
    const { subject } = decision
    const time = rfc3339Micros(at)
    const eventSubject = { user_id: subject.id, principal_type: subject.principal_type, merchant_id: subject.merchant_id, sub_role_code: subject.sub_role_code }
    const clientIp = this.clientIp(decision.peer, decision.forwardedFor)
    const { modelId, replica } = this.settings
    const { caller, source, domain, obj, act, requestId } = decision
    // Two literals rather than a spread of an optional field (an object made and copied per event), in the one key order every sink writes.
    const event: DecisionEvent =
      caller === null || caller.id === subject.id
        ? { decision_id: decision.id, time, source, subject: eventSubject, domain, obj, act, allowed, reason, policy_revision: revision, model_id: modelId, replica, request_id: requestId, client_ip: clientIp }
        : { decision_id: decision.id, time, source, subject: eventSubject, caller_id: caller.id, domain, obj, act, allowed, reason, policy_revision: revision, model_id: modelId, replica, request_id: requestId, client_ip: clientIp }
    if (decision.method !== undefined) event.method = decision.method
    if (decision.path !== undefined) event.path = this.settings.includeQuery ? decision.path : withoutQuery(decision.path)
    return event
  }

  /**
   * The client's address as events write it, kept for the last peer and
   * `x-forwarded-for` seen: a gateway's decisions come over a few kept-alive
   * connections, so most events ask again about the one just read.
   */
  private clientIp(peer: string | undefined, forwardedFor: string | undefined): string {
    if (this.lastIp !== null && peer === this.lastPeer && forwardedFor === this.lastForwardedFor) return this.lastIp
    const address = clientAddress(peer, forwardedFor, this.settings.trustProxy)
    this.lastPeer = peer
    this.lastForwardedFor = forwardedFor
    this.lastIp = address === null ? '' : truncateAddress(address, this.settings.clientIpPrefix)
    return this.lastIp
  }

  /** Flushes what was handed over and lets every sink write until `deadline` (ms since the epoch); then closes them. */
  async close(deadline: number): Promise<void> {
    this.flush()
    await Promise.all(this.pipelines.map((pipeline) => pipeline.close(deadline)))
  }
}

/** A path without its query (and fragment). */
function withoutQuery(path: string): string {
  const mark = path.search(/[?#]/)
  return mark < 0 ? path : path.slice(0, mark)
}
