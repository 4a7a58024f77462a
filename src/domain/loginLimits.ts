/**
 * The login limits: failed password checks (logins and change-password)
 * per account, counted per client address so that a stranger's guesses cost
 * the stranger and not the owner, under a higher ceiling per account that a
 * guesser rotating addresses runs into.
 */

/** Failures count within this sliding window. */
export const LOGIN_FAILURE_WINDOW_SECONDS = 15 * 60

/** The ceiling over all addresses of one account is this many times the per-address limit. */
export const ACCOUNT_CEILING_FACTOR = 10

/** A network the account logged in from within this many days passes the account's ceiling (not its own limit). */
export const KNOWN_NETWORK_DAYS = 30

export interface LoginLimits {
  /** Failures of one account from one address (IPv6: one /64) within the window: LOGIN_ACCOUNT_FAILURES. */
  perAddress: number
  /** Failures of one account from all addresses within the window. */
  perAccount: number
}

export function loginLimits(perAddress: number): LoginLimits {
  return { perAddress, perAccount: perAddress * ACCOUNT_CEILING_FACTOR }
}

/** An account's failures within the window, each as the seconds until it leaves it, newest first. */
export interface RecentFailures {
  /** From the attempt's own address, at most `perAddress` of them. */
  fromAddress: number[]
  /** From every address, at most `perAccount` of them. */
  all: number[]
  /** The attempt's network logged in to this account successfully within KNOWN_NETWORK_DAYS. */
  knownNetwork: boolean
}

export type AttemptVerdict = { admitted: true } | { admitted: false; retryAfterSeconds: number }

/**
 * Whether a password may be checked. When a limit is reached, the wait is
 * until the oldest of the failures that keep it reached leaves the window.
 */
export function judgeAttempt(recent: RecentFailures, limits: LoginLimits): AttemptVerdict {
  const reached = (failures: number[], limit: number): AttemptVerdict | null => {
    const limiting = failures.length >= limit ? failures[limit - 1] : undefined
    return limiting === undefined ? null : { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil(limiting)) }
  }
  return reached(recent.fromAddress, limits.perAddress) ?? (recent.knownNetwork ? null : reached(recent.all, limits.perAccount)) ?? { admitted: true }
}
