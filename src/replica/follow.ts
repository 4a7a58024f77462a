import { ChangeFeedListener } from '../storage/changeFeed.js'
import { currentSchema } from '../storage/changes.js'
import type { Database } from '../storage/db.js'
import type { Replica, ReplicaLogger } from './replica.js'

/** After a failed read of the feed, how soon the next is tried (sooner than the next poll). */
const SYNC_RETRY_MS = 500

/**
 * Keeps this process in step with the others: every notification, every
 * reconnection and every poll tick reads the change feed from the revision
 * applied. Failures are logged when they start and when they end, not on
 * every tick of an outage. Resolves with the listener, started; stop it to stop following.
 */
export async function followChanges(
  db: Database,
  replica: Replica,
  options: { pollMs: number; log?: ReplicaLogger | undefined },
): Promise<ChangeFeedListener> {
  const { log } = options
  let failing = false
  let retry: NodeJS.Timeout | null = null
  const sync = () => {
    replica.sync().then(
      () => {
        if (failing) log?.info({ revision: replica.revision }, 'the database answers again: the policy is current')
        failing = false
      },
      (error: unknown) => {
        if (!failing) log?.warn({ err: error, revision: replica.revision }, 'cannot read the change feed: answering from memory until the staleness bound')
        failing = true
        // Keep trying every half second rather than at the next poll: what changed meanwhile applies soon after recovery.
        retry ??= setTimeout(() => {
          retry = null
          if (failing) sync()
        }, SYNC_RETRY_MS).unref()
      },
    )
  }
  const feed = new ChangeFeedListener(db, {
    schema: await currentSchema(db),
    pollMs: options.pollMs,
    onSignal: (revision) => {
      if (revision === null || revision > replica.revision) sync()
    },
    ...(log ? { log } : {}),
  })
  feed.start()
  return feed
}
