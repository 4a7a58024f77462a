/**
 * Bounded polling for things that happen asynchronously: a replica following
 * a write, a timer firing an expiry. Tests assert that the condition comes to
 * hold, not how fast: on a loaded machine (CI runs several test files at
 * once) a one-second bound turns a slow run red although nothing is wrong.
 * How quickly it happens is measured by the benchmarks, not the tests.
 */

/** Long enough for any loaded machine, short of tap's per-file timeout. */
export const EVENTUALLY_MS = 15_000

/** Polls `condition` every `intervalMs` until it holds (true) or `timeoutMs` passed (false). */
export async function eventually(condition: () => boolean | Promise<boolean>, timeoutMs = EVENTUALLY_MS, intervalMs = 5): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await condition()) return true
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
