import type { Logger, Service } from './compose.js'
import { countAccounts } from './storage/accounts.js'
import { currentRevision } from './storage/revision.js'

/**
 * What the server says once the service is built: on a first embedded start,
 * the system owner's one-time password, on stderr only and whatever
 * LOG_LEVEL says (an operator who misses it is locked out until `cli
 * password reset`); the structured log, which collectors keep, only says
 * that the account was made and where the password went. On PostgreSQL with
 * no account yet, how to create one; then that it is ready, and at which
 * revision.
 */
export async function announceStart(service: Service, log: Logger): Promise<void> {
  const { firstAdmin, config } = service
  if (firstAdmin !== null) {
    process.stderr.write(
      `\nFIRST START: the system-owner super_admin ${firstAdmin.email} was created with password ${firstAdmin.password}\n` +
        'It is shown this once. The console asks for a new one at the first sign-in (or POST /v2/profile/password); ' +
        'if it is lost: `npm run cli -- password reset --email E`.\n\n',
    )
    log.warn(
      { email: firstAdmin.email },
      `FIRST START: created the system-owner super_admin ${firstAdmin.email}; its one-time password was printed on this process's stderr, not in this log`,
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
