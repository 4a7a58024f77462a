import { resetPassword } from '../commands/passwords.js'
import { buildService, openDatabase } from '../compose.js'
import type { CliContext } from './commands.js'
import { CliFailure } from './commands.js'
import { parseOptions } from './inputs.js'

/**
 * `password reset --email E`: rescues a locked-out admin (a first-start
 * password missed in the log, a forgotten one). Prints the new random
 * password once; every token issued before is refused on every server.
 */
export async function passwordResetCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = parseOptions(args, { email: { type: 'string' } }, ['email'])
  const db = ctx.db ?? (await openDatabase(ctx.config.storage, { limits: ctx.config.database }))
  try {
    const service = await buildService({ ...ctx.config, bootstrapAdmin: null }, { db, skipFirstAdmin: true, follow: false })
    const reset = await resetPassword(service, o.email as string)
    if (reset === null) throw new CliFailure(`no administrator account has the e-mail ${o.email as string}`)
    ctx.io.out(`new password for ${reset.account.email}: ${reset.password}`)
    ctx.io.out('it is shown once; tokens issued before are refused from now on')
    return 0
  } finally {
    if (ctx.db === undefined) await db.close()
  }
}
