import type { Database } from '../storage/db.js'
import { insertDecisionEvents, maintainDecisionPartitions } from '../storage/decisionEvents.js'
import type { DecisionEvent, DecisionSink } from './event.js'

/**
 * How often the day partitions are made ahead and old ones dropped. Tomorrow's
 * partition exists a day in advance, so an hour leaves a wide margin; and
 * events of a day without one wait in the default partition, never failing.
 */
const MAINTENANCE_INTERVAL_MS = 60 * 60 * 1000

/**
 * The `postgres` sink: each batch is one INSERT into the service's own
 * database, into a table partitioned by UTC day and kept `retentionDays`
 * days. The pipeline in front batches, retries and drops; this only writes.
 */
export function postgresDecisionSink(db: Database, options: { retentionDays: number }): DecisionSink {
  let maintaining: Promise<void> = Promise.resolve()
  const maintain = () => {
    maintaining = maintaining.then(() =>
      maintainDecisionPartitions(db, options.retentionDays).catch(() => {
        // Nothing is lost meanwhile (events wait in the default partition); the next turn tries again.
      }),
    )
  }
  maintain()
  const timer = setInterval(maintain, MAINTENANCE_INTERVAL_MS).unref()
  return {
    name: 'postgres',
    write: (events: readonly DecisionEvent[]) => insertDecisionEvents(db, events),
    async close() {
      clearInterval(timer)
      await maintaining
    },
  }
}
