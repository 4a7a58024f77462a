/** A scheduled callback that can be cancelled. */
export interface ClockTimer {
  cancel(): void
}

/**
 * The time the service reads and the timers it sets for instants such as an
 * override's expiry. Tests hand in a clock they move by hand, so an expiry a
 * week away is tested without waiting for it.
 */
export interface Clock {
  now(): number
  /** Calls `fn` once `at` (epoch milliseconds) has passed; at once when it already has. */
  at(at: number, fn: () => void): ClockTimer
}

/** setTimeout's largest delay (about 24.8 days): a later instant is reached by waking up and setting the timer again. */
const LONGEST_DELAY_MS = 2 ** 31 - 1

export const systemClock: Clock = {
  now: () => Date.now(),
  at(at, fn) {
    let handle: NodeJS.Timeout
    const arm = () => {
      const delay = at - Date.now()
      if (delay > LONGEST_DELAY_MS) {
        handle = setTimeout(arm, LONGEST_DELAY_MS).unref()
        return
      }
      // A timer never keeps the process alive: shutdown does not wait for the next expiry.
      handle = setTimeout(fn, Math.max(0, delay)).unref()
    }
    arm()
    return { cancel: () => clearTimeout(handle) }
  },
}
