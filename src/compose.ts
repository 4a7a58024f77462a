import { createHash } from 'node:crypto'
import { hostname } from 'node:os'
import type { Config, StorageConfig } from './config.js'
import { bootstrapSystemOwner, createFirstAdmin } from './commands/bootstrap.js'
import type { CommandContext } from './commands/context.js'
import { OverrideExpiry } from './commands/sweepExpiredOverrides.js'
import { syncCatalog } from './commands/syncCatalog.js'
import { WriteQueue } from './commands/writeQueue.js'
import { systemClock, type Clock } from './domain/clock.js'
import { declaredCatalog } from './domain/permissions.js'
import { rootRoleCodes } from './domain/root.js'
import { PermissionEngine, type EngineState } from './engine/engine.js'
import { readModel } from './engine/model.js'
import { admitShadowModel, gateModelDecisions, logDecisionPath } from './modelGate.js'
import { emptyPolicyRecord, type PolicyRecord } from './engine/adapter.js'
import { ShadowEngine } from './engine/shadowEngine.js'
import { ShadowModelComparer } from './decisionLog/shadow.js'
import { followChanges } from './replica/follow.js'
import { Replica } from './replica/replica.js'
import { createPasswordHasher, type PasswordHasher } from './security/passwords.js'
import { createTokenIssuer, type TokenIssuer } from './security/tokens.js'
import { AccountDirectory } from './storage/accountDirectory.js'
import { listCatalog } from './storage/catalog.js'
import type { ChangeFeedListener } from './storage/changeFeed.js'
import type { Database, Queryable } from './storage/db.js'
import { migrate } from './storage/migrate.js'
import { openPostgres } from './storage/pg.js'
import { openPGlite } from './storage/pglite.js'
import { requirePrivileges } from './storage/privileges.js'
import { currentRevision } from './storage/revision.js'
import type { DecisionRecorder } from './decisionLog/recorder.js'
import { openDecisionLog, type DecisionLogParts } from './decisionLog/sinks.js'
import { postgresDecisionSink } from './decisionLog/postgresSink.js'
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
  /** The revision this process's memory reflects, and how it follows the store. */
  replica: Replica
  /** `ready`, or why not: the database does not answer, or the policy could not be confirmed current. */
  readiness(): Promise<'ready' | 'unavailable' | 'stale'>
  reload(): Promise<void>
  /** Gateway decisions, handed over after their answers (CONTRACT 15). */
  decisionLog: DecisionRecorder
  /** Closes everything; buffered decision events are written until `deadline` (ms since the epoch; default: SHUTDOWN_TIMEOUT_MS from now). */
  close(deadline?: number): Promise<void>
  /** The shadow model (SHADOW_MODEL_PATH) asked after each gateway answer; null when none is configured or it was refused. */
  shadow: ShadowModelComparer | null
  /** Why the configured shadow model was refused at start; null when it was not (or none is configured). */
  shadowRefusal: string | null
}

export async function openDatabase(
  storage: StorageConfig,
  options: { schema?: string; log?: Logger; limits?: Config['database'] } = {},
): Promise<Database> {
  if (storage.kind === 'pglite') return openPGlite(storage.dataDir)
  return openPostgres({
    url: storage.url,
    ...(options.schema !== undefined ? { schema: options.schema } : {}),
    ...(options.limits !== undefined
      ? { connectTimeoutMs: options.limits.connectTimeoutMs, statementTimeoutMs: options.limits.statementTimeoutMs, max: options.limits.poolMax }
      : {}),
    onIdleError: (error) => options.log?.warn({ err: error }, 'an idle database connection failed; it will be replaced'),
  })
}

async function engineState(db: Queryable): Promise<EngineState> {
  const [roles, catalog] = await Promise.all([listSubRoles(db), listCatalog(db)])
  return { rootRoles: rootRoleCodes(roles), catalog }
}

export interface BuildOptions {
  /** Use this database instead of opening the configured one (tests). */
  db?: Database
  log?: Logger
  passwords?: PasswordHasher
  /** Skip creating the first admin on an empty embedded store. */
  skipFirstAdmin?: boolean
  /** Follow other processes' changes (LISTEN and the reconciling poll) and expire overrides; off for one-shot commands. Default on. */
  follow?: boolean
  /** The clock override expiries are read against (tests move one by hand). */
  clock?: Clock
  /** Run the model's decisions file before anything else and refuse to start when it fails (the server's start). */
  gateModel?: boolean
  /** The decision log's parts that are not settings: the shadow model, the postgres sink, where `stdout` writes (tests). */
  decisionLog?: Pick<DecisionLogParts, 'shadow' | 'makePostgresSink' | 'stdout'>
}

/** The first 12 hex digits of the model text's SHA-256: which model decided, in every decision event. */
export function modelId(modelText: string): string {
  return createHash('sha256').update(modelText).digest('hex').slice(0, 12)
}

/** Builds the whole service from its configuration: storage, migrations, engine, catalog, bootstrap. */
export async function buildService(config: Config, options: BuildOptions = {}): Promise<Service> {
  const db = options.db ?? (await openDatabase(config.storage, { ...(options.log ? { log: options.log } : {}), limits: config.database }))
  let feed: ChangeFeedListener | null = null
  let expiry: OverrideExpiry | null = null
  const clock = options.clock ?? systemClock
  try {
    // Before the migrations, which would stop at the first table refused with a bare "permission denied".
    if (db.kind === 'postgres') await requirePrivileges(db)
    await migrate(db)
    const model = readModel(config.modelPath)
    if (options.gateModel === true) await gateModelDecisions(config, db, options.log)
    // Only a process that answers the gateway (one that follows the store) compares decisions.
    const shadowModel = options.follow === false ? null : config.shadowModel
    const admission = shadowModel === null ? null : await admitShadowModel(shadowModel, config.modelDecisions, db, options.log)
    let shadowRefusal = admission?.admitted === false ? admission.refusal : null
    // The policy, the accounts and the revision they reflect, all from one snapshot.
    const accounts = new AccountDirectory(db, () => clock.now())
    const { engine, revision, shadowEngine } = await db.snapshot(async (tx) => {
      const revision = await currentRevision(tx)
      const state = await engineState(tx)
      // The shadow loads the very rows the live engine read.
      const record: PolicyRecord | undefined = admission?.admitted === true ? emptyPolicyRecord() : undefined
      const engine = await PermissionEngine.load(tx, model.text, state, () => clock.now(), record)
      let shadowEngine: ShadowEngine | null = null
      if (admission?.admitted === true && record !== undefined) {
        try {
          shadowEngine = await ShadowEngine.load(admission.text, record, state, () => clock.now(), (why) =>
            options.log?.error({ shadow_model: shadowModel?.path, why }, `the shadow model stopped comparing until the next full reload: ${why}`),
          )
        } catch (error) {
          shadowRefusal = `the shadow model does not load: ${(error as Error).message}`
          options.log?.error({ shadow_model: shadowModel?.path, refusal: shadowRefusal }, `the shadow model is refused, the service runs without it: ${shadowRefusal}`)
        }
      }
      await accounts.load(tx)
      return { engine, revision, shadowEngine }
    })
    const shadow =
      shadowEngine === null || shadowModel === null
        ? null
        : new ShadowModelComparer(shadowEngine, { sample: shadowModel.sample, ...(options.log ? { log: options.log } : {}), now: () => clock.now() })
    const replica = new Replica(db, { engine, accounts, shadow: shadowEngine }, engineState, revision, {
      // A process that does not follow the store (a one-shot command) has nothing to confirm its revision with.
      maxStalenessMs: options.follow === false ? Number.POSITIVE_INFINITY : config.replication.maxStalenessMs,
      ...(options.log ? { log: options.log } : {}),
    })
    if (options.log !== undefined) logDecisionPath(engine, config.modelPath, options.log)
    const writes = new WriteQueue(db, replica, config.database.statementTimeoutMs, config.changeStream.retentionDays)
    const passwords = options.passwords ?? createPasswordHasher()
    const ctx: CommandContext = { db, engine, accounts, passwords, writes, clock, subRolesExplicit: config.subRolesExplicit }
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

    // A one-shot command makes no gateway decision: it opens no sink.
    const logSettings = options.follow === false ? { ...config.decisionLog, mode: 'off' as const } : config.decisionLog
    const decisionLog = openDecisionLog(
      { ...logSettings, trustProxy: config.trustProxy, replica: hostname(), modelId: modelId(model.text) },
      {
        rules: engine,
        revision: () => replica.revision,
        makePostgresSink: () => postgresDecisionSink(db, { retentionDays: config.decisionLog.retentionDays }),
        shadow,
        ...options.decisionLog,
        ...(options.log ? { log: options.log } : {}),
      },
    )

    if (options.follow !== false) {
      feed = await followChanges(db, replica, { pollMs: config.replication.pollMs, log: options.log })
      expiry = new OverrideExpiry(ctx, replica, clock, options.log)
      expiry.start()
    }

    const following = feed
    const expiring = expiry
    return {
      ...ctx,
      config,
      tokens,
      firstAdmin,
      replica,
      shadow,
      shadowRefusal,
      reload: () => replica.reload(),
      decisionLog,
      async readiness() {
        try {
          await db.query('SELECT 1')
        } catch {
          return 'unavailable'
        }
        return replica.isStale() ? 'stale' : 'ready'
      },
      // The database is closed by whoever opened it: a database handed in (tests, the CLI) stays open.
      async close(deadline = Date.now() + config.shutdownTimeoutMs) {
        // Before the database closes: the postgres sink writes through it.
        await decisionLog.close(deadline)
        expiring?.stop()
        await following?.stop()
        replica.stop()
        if (options.db === undefined) await db.close()
      },
    }
  } catch (error) {
    expiry?.stop()
    await feed?.stop()
    if (options.db === undefined) await db.close().catch(() => undefined)
    throw error
  }
}
