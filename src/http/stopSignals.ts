import type { FastifyBaseLogger } from 'fastify'
import { EXIT_FORCED } from './shutdown.js'

export interface StopSignals {
  /** Aborted by the first SIGTERM or SIGINT. */
  signal: AbortSignal
  /** The name of that first signal ('' before one arrives). */
  received(): string
}

/**
 * Listens for SIGTERM and SIGINT: the first one aborts `signal` and starts
 * the deadline, past which the process exits with EXIT_FORCED whatever is
 * still under way.
 */
export function listenForStop(log: FastifyBaseLogger, timeoutMs: number): StopSignals {
  const stop = new AbortController()
  let received = ''
  const onSignal = (signal: NodeJS.Signals) => {
    // Kept for every signal, not once: under `npm start` a Ctrl-C is sent to the server twice (by the
    // terminal and forwarded by npm), and a second SIGINT left to its default would kill it mid-stop.
    if (stop.signal.aborted) {
      log.info({ signal }, 'already stopping')
      return
    }
    received = signal
    setTimeout(() => {
      log.error({ timeoutMs }, `shutdown did not finish within ${timeoutMs} ms: exiting`)
      process.exit(EXIT_FORCED)
    }, timeoutMs)
    stop.abort()
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  return { signal: stop.signal, received: () => received }
}
