import { buildService, openDatabase, type Service } from '../compose.js'
import type { Config, DatabaseConfig } from '../config.js'
import { bootstrapSystemOwner } from '../commands/bootstrap.js'
import { onboardMerchant } from '../commands/onboardMerchant.js'
import { describeProblem, verifyAudit } from '../commands/verifyAudit.js'
import { SYSTEM_ACTOR } from '../domain/audit.js'
import { describeDecisionCost, measureDecisionCost } from '../engine/decisionCost.js'
import { PermissionEngine } from '../engine/engine.js'
import { readModel } from '../engine/model.js'
import { createTokenIssuer } from '../security/tokens.js'
import { findAccountByEmail } from '../storage/accounts.js'
import type { Database } from '../storage/db.js'
import { migrate } from '../storage/migrate.js'
import { UsageError, checkBootstrapInput, checkOnboardInput, parseOptions, parseTtl } from './inputs.js'
import {
  checkModel,
  compareModels,
  comparisonSpace,
  decisionsVerdict,
  failureLine,
  loadComparisonModel,
  readDecisions,
  readPolicyFile,
  type PolicySource,
} from '../modelCheck/modelCheck.js'

export interface CliIo {
  out(line: string): void
  err(line: string): void
}

/** A command that ran and failed for a reason the operator can act on: exit code 1, the message alone. */
export class CliFailure extends Error {}

export const USAGE = `usage: admin-permission-service <command> [options]

  bootstrap --email E --password P [--name N]     create the system-owner super_admin (idempotent)
  onboard-merchant --merchant-id M --email E --password P [--name N] [--phone X] [--display-name D]
                                                  create a merchant (named D, else by its id) and its super_admin
  token --email E [--ttl 1h]                      print an access token for an account (ttl: 30m, 1h, 2d or seconds)
  model check [--model F] [--decisions F] [--policy F] [--against OLD]
                                                  validate a Casbin model and replay the policy through it; with
                                                  --decisions, check each "sub, dom, obj, act -> allow|deny" line of F
                                                  (on the p/g lines in F, or --policy F, a Casbin CSV, or else the
                                                  stored policy); with --against, list every decision of the policy's
                                                  subjects that differs from model OLD; exit 1 when any fails or differs
  migrate                                         apply the SQL migrations in sql/
  audit verify                                    walk the whole audit hash chain; exit 1 naming the first tampered row
  policy export [--domain D]                      print the policy as Casbin CSV for model.conf: a header naming its
                                                  scope, role rules and user overrides as p lines (an expiring one after
                                                  its "# expires_at" comment), assignments as g lines, sorted; with
                                                  --domain, what decides in D: the p and g rows of D and of global
                                                  (rules of pairs not active in the catalog decide nothing and are left out)
  policy import --file F [--domain D] [--dry-run] [--allow-mass-removal] [--max-removal-percent N] [--allow-headerless]
                                                  make the stored p rules what F says (with --domain, D's only; F's
                                                  global lines must then be as stored), printing the difference; one
                                                  transaction, one audit entry per change (actor system); g lines must
                                                  match the stored assignments; overrides whose expiry has passed are
                                                  skipped and listed; --dry-run writes nothing; refused, changing
                                                  nothing (exit 2): a line that breaks the rules (named), a file whose
                                                  header names another scope or that has none (unless
                                                  --allow-headerless), removing more than 5 rules and more than N%
                                                  (default 10) of those in reach (unless --allow-mass-removal)

Configuration comes from the same environment variables as the server (DATABASE_URL, JWT_SECRET, MODEL_PATH, ...);
migrate, audit verify and model check need no JWT setting.
Exit codes: 0 done, 1 failed, 2 usage error.`

/** A command's context; `config` is the whole configuration, or only the database's for the commands that need no more. */
export interface CliContext<C extends DatabaseConfig = Config> {
  config: C
  io: CliIo
  /** Use this database instead of the configured one (tests); it is left open. */
  db?: Database
}

/** Opens the configured database for one command (or uses the injected one) and always closes what it opened. */
async function withDatabase<T>(ctx: CliContext<DatabaseConfig>, work: (db: Database) => Promise<T>): Promise<T> {
  const db = ctx.db ?? (await openDatabase(ctx.config.storage, { limits: ctx.config.database }))
  try {
    return await work(db)
  } finally {
    if (ctx.db === undefined) await db.close()
  }
}

/**
 * The whole service, for the commands that write accounts (they need the
 * engine, the write queue and the account directory). Never the random first
 * admin, and never the BOOTSTRAP_* account behind the operator's back.
 */
export function withService<T>(ctx: CliContext, work: (service: Service) => Promise<T>): Promise<T> {
  return withDatabase(ctx, async (db) =>
    work(await buildService({ ...ctx.config, bootstrapAdmin: null }, { db, skipFirstAdmin: true, follow: false })),
  )
}

export async function bootstrapCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = parseOptions(args, { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' } }, ['email', 'password'])
  checkBootstrapInput(o)
  const input = { email: o.email as string, password: o.password as string, name: o.name }
  return withService(ctx, async (service) => {
    const result = await bootstrapSystemOwner(service, input)
    if (result.created) ctx.io.out(`created the system-owner super_admin ${result.account.email} (${result.account.id})`)
    else ctx.io.out('a system-owner super_admin already exists; nothing was created')
    return 0
  })
}

export async function onboardCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = parseOptions(
    args,
    {
      'merchant-id': { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      name: { type: 'string' },
      phone: { type: 'string' },
      'display-name': { type: 'string' },
    },
    ['merchant-id', 'email', 'password'],
  )
  const merchantId = o['merchant-id'] as string
  const input = {
    merchant_id: merchantId,
    email: o.email as string,
    password: o.password as string,
    name: o.name ?? `${merchantId} owner`,
    phone: o.phone,
    display_name: o['display-name'],
  }
  checkOnboardInput(input)
  return withService(ctx, async (service) => {
    const account = await onboardMerchant(service, SYSTEM_ACTOR, input)
    ctx.io.out(`onboarded merchant ${merchantId}; its super_admin is ${account.email} (${account.id})`)
    return 0
  })
}

/** Reads one account and signs a token: no engine, no catalog sync, nothing written beyond pending migrations. */
export async function tokenCommand(ctx: CliContext, args: string[]): Promise<number> {
  const o = parseOptions(args, { email: { type: 'string' }, ttl: { type: 'string' } }, ['email'])
  const ttl = o.ttl === undefined ? ctx.config.tokenTtlSeconds : parseTtl(o.ttl)
  const { jwt, storage } = ctx.config
  if (jwt.mode !== 'secret') {
    throw new CliFailure('token needs JWT_SECRET: with JWT_PUBLIC_KEY or JWT_JWKS_URL, access tokens come from the external issuer')
  }
  if (jwt.generated && storage.kind === 'pglite' && storage.dataDir === null && ctx.db === undefined) {
    throw new CliFailure('token needs JWT_SECRET: with DATABASE_URL=pglite://memory the generated key dies with this process')
  }
  const issuer = createTokenIssuer({ secret: jwt.secret, ttlSeconds: ttl, issuer: ctx.config.jwtIssuer, audience: ctx.config.jwtAudience })
  return withDatabase(ctx, async (db) => {
    await migrate(db)
    const account = await findAccountByEmail(db, o.email as string)
    if (account === null) throw new CliFailure(`no administrator account has the e-mail ${o.email as string}`)
    ctx.io.out(issuer.issue(account).access_token)
    return 0
  })
}

export async function modelCheckCommand(ctx: CliContext<DatabaseConfig>, args: string[]): Promise<number> {
  const o = parseOptions(args, { model: { type: 'string' }, decisions: { type: 'string' }, policy: { type: 'string' }, against: { type: 'string' } })
  const modelPath = o.model ?? ctx.config.modelPath
  const decisions = o.decisions === undefined ? null : readDecisions(o.decisions)
  const ownRules = decisions?.rules ?? null
  if (o.policy !== undefined && ownRules !== null) {
    throw new UsageError(`${o.decisions ?? ''} has a policy of its own (p and g lines): drop them or --policy`)
  }
  const filePolicy =
    o.policy !== undefined
      ? { path: o.policy, rules: readPolicyFile(o.policy) }
      : ownRules !== null
        ? { path: o.decisions ?? '', rules: ownRules }
        : null

  const check = async (source: PolicySource, db?: Database): Promise<number> => {
    // Everything is evaluated before anything is printed: a model that cannot be evaluated prints one error and no claim.
    const { checked, failed } = decisions === null ? { checked: await checkModel(modelPath, source), failed: [] } : await decisionsVerdict(modelPath, decisions, source)
    const before = o.against === undefined ? null : await loadComparisonModel(o.against, source, checked.rules)
    const space = before === null ? null : await comparisonSpace(checked.rules, db)
    const differences = before === null || space === null ? [] : await compareModels(before, checked.enforcer, space)

    const { report } = checked
    const what = source.kind === 'stored' ? 'the stored policy' : source.label
    ctx.io.out(
      `model ${report.path} is valid; ${what} loads through it: ${report.pRules} p rules${source.kind === 'stored' ? ' (overrides included)' : ''}, ` +
        `${report.gRules} g rules; ${report.probes} requests replayed`,
    )
    ctx.io.out(describeDecisionCost(measureDecisionCost(await PermissionEngine.fromRules(readModel(modelPath).text, checked.rules))))
    const problems: string[] = []
    if (decisions !== null) {
      for (const f of failed) {
        ctx.io.out(failureLine(decisions.path, f))
      }
      const total = decisions.decisions.length
      if (failed.length === 0) ctx.io.out(`decisions in ${decisions.path}: all ${total} hold`)
      else problems.push(`${failed.length} of ${total} decisions in ${decisions.path} do not hold`)
    }
    if (space !== null) {
      const asked = space.subjects.length * space.domains.length * space.pairs.length
      ctx.io.out(
        `compared with ${o.against ?? ''}: ${space.subjects.length} subjects x ${space.domains.length} domains x ${space.pairs.length} pairs = ` +
          `${asked} requests; ${differences.length === 0 ? 'no decision differs' : `${differences.length} differ (${o.against ?? ''} -> ${report.path}):`}`,
      )
      for (const d of differences) ctx.io.out(`  ${d.request.join(', ')}: ${d.before ? 'allow' : 'deny'} -> ${d.after ? 'allow' : 'deny'}`)
      if (differences.length > 0) problems.push(`${differences.length} decisions differ from ${o.against ?? ''}`)
    }
    if (problems.length === 0) return 0
    ctx.io.err(`model check failed: ${problems.join('; ')}`)
    return 1
  }

  // A policy from a file needs no database: CI checks the model without one.
  if (filePolicy !== null) return check({ kind: 'rules', label: `the policy in ${filePolicy.path}`, rules: filePolicy.rules })
  return withDatabase(ctx, async (db) => {
    await migrate(db)
    return check({ kind: 'stored', db }, db)
  })
}

export async function migrateCommand(ctx: CliContext<DatabaseConfig>, args: string[]): Promise<number> {
  parseOptions(args, {})
  return withDatabase(ctx, async (db) => {
    const applied = await migrate(db)
    ctx.io.out(applied.length === 0 ? 'the schema is up to date; no migration applied' : `applied ${applied.join(', ')}`)
    return 0
  })
}

export async function auditVerifyCommand(ctx: CliContext<DatabaseConfig>, args: string[]): Promise<number> {
  parseOptions(args, {})
  return withDatabase(ctx, async (db) => {
    // Always from the first row: the checkpoint the console's visits use is a row in the same database, so it proves nothing here.
    const result = await verifyAudit(db, { full: true })
    if (result.problem === null) {
      ctx.io.out(`the audit trail is whole: ${result.rows} rows verified`)
      return 0
    }
    ctx.io.err(describeProblem(result.problem))
    return 1
  })
}
