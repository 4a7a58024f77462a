import type { Config, StorageConfig } from './config.js'
import { bootstrapSystemOwner, createFirstAdmin } from './commands/bootstrap.js'
import type { CommandContext } from './commands/context.js'
import { syncCatalog } from './commands/syncCatalog.js'
import { WriteQueue } from './commands/writeQueue.js'
import { declaredCatalog } from './domain/permissions.js'
import { PermissionEngine, type EngineState } from './engine/engine.js'
import { readModel } from './engine/model.js'
import { createPasswordHasher, type PasswordHasher } from './security/passwords.js'
import { createTokenIssuer, type TokenIssuer } from './security/tokens.js'
import { AccountDirectory } from './storage/accountDirectory.js'
import { listCatalog } from './storage/catalog.js'
import type { Database, Queryable } from './storage/db.js'
import { migrate } from './storage/migrate.js'
import { openPostgres } from './storage/pg.js'
import { openPGlite } from './storage/pglite.js'
import { listSubRoles } from './storage/subRoles.js'

export interface Logger {
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
  error(obj: object, msg?: string): void
}

export interface Service extends CommandContext {
  config: Config
  tokens: TokenIssuer | null
  /** Credentials of the admin created on a first embedded start, to print once. */
  firstAdmin: { email: string; password: string } | null
  ready(): Promise<boolean>
  reload(): Promise<void>
  close(): Promise<void>
}

export async function openDatabase(storage: StorageConfig, options: { schema?: string; log?: Logger } = {}): Promise<Database> {
  if (storage.kind === 'pglite') return openPGlite(storage.dataDir)
  return openPostgres({
    url: storage.url,
    ...(options.schema !== undefined ? { schema: options.schema } : {}),
    onIdleError: (error) => options.log?.warn({ err: error }, 'an idle database connection failed; it will be replaced'),
  })
}

async function engineState(db: Queryable): Promise<EngineState> {
  const [roles, catalog] = await Promise.all([listSubRoles(db), listCatalog(db)])
  return { rootRoles: roles.filter((r) => r.is_root).map((r) => r.code), catalog }
}

export interface BuildOptions {
  /** Use this database instead of opening the configured one (tests). */
  db?: Database
  log?: Logger
  passwords?: PasswordHasher
  /** Skip creating the first admin on an empty embedded store. */
  skipFirstAdmin?: boolean
}

/** Builds the whole service from its configuration: storage, migrations, engine, catalog, bootstrap. */
export async function buildService(config: Config, options: BuildOptions = {}): Promise<Service> {
  const db = options.db ?? (await openDatabase(config.storage, options.log ? { log: options.log } : {}))
  try {
    await migrate(db)
    const model = readModel(config.modelPath)
    const engine = await PermissionEngine.load(db, model.text, await engineState(db))
    const accounts = new AccountDirectory(db)
    await accounts.load()
    if (engine.mode !== 'index') {
      options.log?.warn(
        { model: config.modelPath },
        'the Casbin model differs from the one the decision index implements: decisions use enforce() with a cache (correct, slower)',
      )
    }
    const reloadNow = async () => {
      await engine.reload(db, await engineState(db))
      await accounts.load()
    }
    const writes = new WriteQueue(db, engine, reloadNow)
    const reload = () => writes.exclusive(reloadNow)
    const passwords = options.passwords ?? createPasswordHasher()
    const ctx: CommandContext = { db, engine, accounts, passwords, writes }
    await syncCatalog(ctx, declaredCatalog())

    if (config.bootstrapAdmin !== null) {
      const result = await bootstrapSystemOwner(ctx, config.bootstrapAdmin)
      if (result.created) options.log?.info({ email: config.bootstrapAdmin.email }, 'created the system-owner super_admin')
    }
    let firstAdmin: Service['firstAdmin'] = null
    if (config.storage.kind === 'pglite' && config.bootstrapAdmin === null && options.skipFirstAdmin !== true) {
      firstAdmin = await createFirstAdmin(ctx)
    }

    const tokens =
      config.jwt.mode === 'secret'
        ? createTokenIssuer({
            secret: config.jwt.secret,
            ttlSeconds: config.tokenTtlSeconds,
            issuer: config.jwtIssuer,
            audience: config.jwtAudience,
          })
        : null

    return {
      ...ctx,
      config,
      tokens,
      firstAdmin,
      reload,
      async ready() {
        try {
          await db.query('SELECT 1')
          return true
        } catch {
          return false
        }
      },
      close: () => db.close(),
    }
  } catch (error) {
    if (options.db === undefined) await db.close().catch(() => undefined)
    throw error
  }
}
