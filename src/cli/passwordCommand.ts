import { resetPassword } from '../commands/replacePassword.js'
import type { CliContext } from './commands.js'
import { CliFailure, withService } from './commands.js'
import { parseOptions } from './inputs.js'

/**
 * `password reset --email E`: rescues a locked-out admin (a first-start
 * password missed in the log, a forgotten one). Prints the new random
 * password once, marked to be changed at the next sign-in; every token
 * issued before is refused on every server.
 */
export async function passwordResetCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = parseOptions(args, { email: { type: 'string' } }, ['email'])
  return withService(ctx, async (service) => {
    const reset = await resetPassword(service, o.email as string)
    if (reset === null) throw new CliFailure(`no administrator account has the e-mail ${o.email as string}`)
    ctx.io.out(`new password for ${reset.account.email}: ${reset.password}`)
    ctx.io.out('it is shown once and is to be changed at the next sign-in (the console asks); tokens issued before are refused from now on')
    return 0
  })
}
