import { parseArgs } from 'node:util'
import { newEnforcer } from 'casbin'
import { buildService, openDatabase } from '../compose.js'
import type { Config } from '../config.js'
import { bootstrapSystemOwner } from '../commands/bootstrap.js'
import { onboardMerchant } from '../commands/onboardMerchant.js'
import { describeProblem, verifyAudit } from '../commands/verifyAudit.js'
import { SYSTEM_ACTOR } from '../domain/audit.js'
import { ServiceError } from '../domain/errors.js'
import { isValidMerchantId } from '../domain/identifiers.js'
import { StorageAdapter } from '../engine/adapter.js'
import { isReferenceModel } from '../engine/engine.js'
import { ModelError, readModel } from '../engine/model.js'
import { findAccountByEmail } from '../storage/accounts.js'
import type { Database } from '../storage/db.js'
import { migrate } from '../storage/migrate.js'

export interface CliIo {
  out(line: string): void
  err(line: string): void
}

/** A usage mistake: exit code 2. */
export class UsageError extends Error {}

export const USAGE = `usage: admin-permission-service <command> [options]

  bootstrap --email E --password P [--name N]     create the system-owner super_admin (idempotent)
  onboard-merchant --merchant-id M --email E --password P [--name N] [--phone X]
                                                  create a merchant and its super_admin
  token --email E [--ttl 1h]                      print an access token for an account
  model check [--model F]                         validate a Casbin model and replay the stored policy through it
  migrate                                         apply the SQL migrations in sql/
  audit verify                                    walk the audit hash chain; exit 1 naming the first tampered row

Configuration comes from the same environment variables as the server (DATABASE_URL, JWT_SECRET, ...).`

export interface CliContext {
  config: Config
  io: CliIo
  /** Use this database instead of the configured one (tests). */
  db?: Database
}

function options<T extends Record<string, { type: 'string' }>>(args: string[], spec: T, required: Array<keyof T & string>) {
  let parsed: { values: Record<string, string | undefined> }
  try {
    parsed = parseArgs({ args, options: spec, strict: true, allowPositionals: false }) as { values: Record<string, string | undefined> }
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  for (const name of required) {
    if (parsed.values[name] === undefined || parsed.values[name] === '') throw new UsageError(`--${name} is required`)
  }
  return parsed.values as Record<keyof T & string, string | undefined>
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

function checkCredentials(email: string, password: string): void {
  if (!EMAIL.test(email)) throw new UsageError('--email must be a valid e-mail address')
  if (password.length < 8) throw new UsageError('--password must be at least 8 characters long')
}

/** `30m`, `1h`, `2d` or a number of seconds. */
export function parseTtl(text: string): number {
  const match = /^(\d+)([smhd]?)$/.exec(text.trim())
  if (match === null) throw new UsageError(`--ttl must look like 30m, 1h, 2d or a number of seconds, not "${text}"`)
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2] as '' | 's' | 'm' | 'h' | 'd']
  const seconds = Number(match[1]) * unit
  if (seconds < 1) throw new UsageError('--ttl must be at least one second')
  return seconds
}

async function withDatabase<T>(ctx: CliContext, work: (db: Database) => Promise<T>): Promise<T> {
  const db = ctx.db ?? (await openDatabase(ctx.config.storage))
  try {
    return await work(db)
  } finally {
    if (ctx.db === undefined) await db.close()
  }
}

async function withService<T>(ctx: CliContext, work: (service: Awaited<ReturnType<typeof buildService>>) => Promise<T>): Promise<T> {
  return withDatabase(ctx, async (db) => work(await buildService({ ...ctx.config, bootstrapAdmin: null }, { db, skipFirstAdmin: true })))
}

export async function bootstrapCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = options(args, { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' } }, ['email', 'password'])
  checkCredentials(o.email as string, o.password as string)
  return withService(ctx, async (service) => {
    const result = await bootstrapSystemOwner(service, { email: o.email as string, password: o.password as string, name: o.name })
    if (result.created) ctx.io.out(`created the system-owner super_admin ${result.account.email} (${result.account.id})`)
    else ctx.io.out('a system-owner super_admin already exists; nothing was created')
    return 0
  })
}

export async function onboardCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = options(
    args,
    { 'merchant-id': { type: 'string' }, email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' }, phone: { type: 'string' } },
    ['merchant-id', 'email', 'password'],
  )
  const merchantId = o['merchant-id'] as string
  if (!isValidMerchantId(merchantId)) throw new UsageError('--merchant-id must be letters, digits, _ . - (up to 64) and not "global"')
  checkCredentials(o.email as string, o.password as string)
  return withService(ctx, async (service) => {
    const account = await onboardMerchant(service, SYSTEM_ACTOR, {
      merchant_id: merchantId,
      email: o.email as string,
      password: o.password as string,
      name: o.name ?? `${merchantId} owner`,
      phone: o.phone,
    })
    ctx.io.out(`onboarded merchant ${merchantId}; its super_admin is ${account.email} (${account.id})`)
    return 0
  })
}

export async function tokenCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = options(args, { email: { type: 'string' }, ttl: { type: 'string' } }, ['email'])
  const ttl = o.ttl === undefined ? ctx.config.tokenTtlSeconds : parseTtl(o.ttl)
  if (ctx.config.jwt.mode !== 'secret') throw new ServiceError('LOGIN_UNAVAILABLE')
  return withService(ctx, async (service) => {
    const account = await findAccountByEmail(service.db, o.email as string)
    if (account === null || service.tokens === null) throw new ServiceError('USER_NOT_FOUND')
    ctx.io.out(service.tokens.issue(account, ttl).access_token)
    return 0
  })
}

export async function modelCheckCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = options(args, { model: { type: 'string' } }, [])
  const path = o.model ?? ctx.config.modelPath
  const { model } = readModel(path)
  return withDatabase(ctx, async (db) => {
    await migrate(db)
    const enforcer = await newEnforcer(model, new StorageAdapter(db))
    const loaded = enforcer.getModel().model
    const p = loaded.get('p')?.get('p')?.policy.length ?? 0
    const g = loaded.get('g')?.get('g')?.policy.length ?? 0
    ctx.io.out(`model ${path} is valid; the stored policy loads through it: ${p} p rules (overrides included), ${g} g rules`)
    ctx.io.out(
      isReferenceModel(model)
        ? 'decisions will use the decision index'
        : 'the model differs from the one the decision index implements: decisions will use enforce() with a cache',
    )
    return 0
  })
}

export async function migrateCommand(ctx: CliContext, args: string[]): Promise<number> {
  options(args, {}, [])
  return withDatabase(ctx, async (db) => {
    const applied = await migrate(db)
    ctx.io.out(applied.length === 0 ? 'the schema is up to date' : `applied ${applied.join(', ')}`)
    return 0
  })
}

export async function auditVerifyCommand(ctx: CliContext, args: string[]): Promise<number> {
  options(args, {}, [])
  return withDatabase(ctx, async (db) => {
    const result = await verifyAudit(db)
    if (result.problem === null) {
      ctx.io.out(`the audit trail is whole: ${result.rows} rows verified`)
      return 0
    }
    ctx.io.err(describeProblem(result.problem))
    return 1
  })
}

export { ModelError }
