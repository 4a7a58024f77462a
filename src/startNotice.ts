import type { Logger, Service } from './compose.js'
import { countAccounts } from './storage/accounts.js'
import { currentRevision } from './storage/revision.js'

/**
 * What the server says once the service is built: on a first embedded start,
 * the system owner's one-time password (logged, and on stderr whatever
 * LOG_LEVEL says: an operator who misses it is locked out until
 * `cli password reset`); on PostgreSQL with no account yet, how to create
 * one; then that it is ready, and at which revision.
 */
export async function announceStart(service: Service, log: Logger): Promise<void> {
  const { firstAdmin, config } = service
  if (firstAdmin !== null) {
    log.warn(
      { email: firstAdmin.email, password: firstAdmin.password },
      `FIRST START: created the system-owner super_admin ${firstAdmin.email} with password ${firstAdmin.password} (shown once; log in and keep it safe)`,
    )
    process.stderr.write(
      `\nFIRST START: the system-owner super_admin ${firstAdmin.email} was created with password ${firstAdmin.password}\n` +
        'It is shown once: log in and change it (POST /v2/profile/password), or reset it later with `npm run cli -- password reset --email E`.\n\n',
    )
  } else if (config.storage.kind === 'postgres' && (await countAccounts(service.db)) === 0) {
    log.warn(
      {},
      'no administrator exists yet: set BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD, or run `npm run cli -- bootstrap --email E --password P`',
    )
  }
  log.info(
    { storage: config.storage.kind, accounts: service.accounts.size, revision: await currentRevision(service.db), model: config.modelPath },
    'service ready',
  )
}
