import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import { buildService, type Service } from '../compose.js'
import type { Config } from '../config.js'
import { StorageUnavailableError, isStorageUnavailable, sqlState } from '../storage/db.js'

/**
 * Whether a failed start is worth retrying: the database could not be
 * reached. isStorageUnavailable() alone also counts any Error without a code
 * (a model file that does not parse, a bug), and those must stop the start
 * at once; here a failure must name itself: StorageUnavailableError, a
 * socket error code (ECONNREFUSED, ENOTFOUND, ...) or an unavailability
 * SQLSTATE (the server starting up or shutting down).
 */
export function databaseUnreachable(error: unknown): boolean {
  return error instanceof StorageUnavailableError || (sqlState(error) !== undefined && isStorageUnavailable(error))
}

/** What went wrong, in words: StorageUnavailableError carries the driver's error as its cause. */
function reasonOf(error: unknown): string {
  const inner = error instanceof StorageUnavailableError && error.cause !== undefined ? error.cause : error
  if (inner instanceof AggregateError && inner.errors.length > 0) {
    return [...new Set(inner.errors.map((e: unknown) => reasonOf(e)))].join('; ')
  }
  if (inner instanceof Error) return inner.message !== '' ? inner.message : (sqlState(inner) ?? inner.name)
  return String(inner)
}

const FIRST_RETRY_MS = 250
const MAX_RETRY_MS = 5000

/**
 * Builds the service, retrying with exponential backoff while the database
 * cannot be reached, for at most DB_STARTUP_TIMEOUT_MS from the first
 * attempt (an attempt under way then still finishes). Resolves null when
 * `stop` fires first.
 */
export async function buildWithRetry(
  config: Config,
  log: FastifyBaseLogger,
  stop: AbortSignal,
  build: typeof buildService = buildService,
): Promise<Service | null> {
  const began = Date.now()
  const limitMs = config.database.startupTimeoutMs
  let delay = FIRST_RETRY_MS
  for (let attempt = 1; ; attempt++) {
    try {
      return await build(config, { log, gateModel: true })
    } catch (error) {
      if (!databaseUnreachable(error)) throw error
      if (stop.aborted) return null
      const reason = reasonOf(error)
      const remaining = limitMs - (Date.now() - began)
      if (remaining <= 0) {
        throw new Error(`the database is unavailable (${attempt} attempt(s) in ${Date.now() - began} ms, DB_STARTUP_TIMEOUT_MS=${limitMs}): ${reason}`)
      }
      const wait = Math.min(delay, remaining)
      log.warn({ attempt, reason, retryInMs: wait }, `the database is unavailable (attempt ${attempt}): ${reason}; retrying in ${wait} ms`)
      try {
        await sleep(wait, undefined, { signal: stop })
      } catch {
        return null
      }
      delay = Math.min(delay * 2, MAX_RETRY_MS)
    }
  }
}
