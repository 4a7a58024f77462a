/**
 * What each step of the gateway's fast paths costs in process, in
 * nanoseconds per call, on a seeded 1k-rule store (PGlite):
 *   node --import tsx bench/fastPathSteps.ts
 * The HTTP work around them (Node's parser, the socket write) is the bare
 * Fastify route's too, and is measured by `npm run bench`.
 */
import { checkPermission, checkPermissions } from '../src/commands/permissionQueries.js'
import { checkBatchAnswer } from '../src/http/checkBatchAnswer.js'
import { newSpans, readPlainBatch } from '../src/http/plainBatch.js'
import { plainQuery } from '../src/http/gatewayFastPath.js'
import { cachedAccount, credentialsRule, type TokenClaims } from '../src/http/plugins/authentication.js'
import { VerifiedTokenCache } from '../src/http/plugins/tokenCache.js'
import { acceptedClientRequestId, nextRequestId } from '../src/http/requestId.js'
import { ServiceMetrics } from '../src/http/serviceMetrics.js'
import { findAccountByEmail } from '../src/storage/accounts.js'
import { BATCH, BENCH_EMAIL, benchDatabase, benchService, benchSubject, seedRules } from './seed.js'

const { db } = await benchDatabase()
await seedRules(db, 1000)
const service = await benchService(db)
await benchSubject(service)
const clerk = await findAccountByEmail(db, BENCH_EMAIL)
if (clerk === null || service.tokens === null) throw new Error('the bench subject is missing')
const header = `Bearer ${service.tokens.issue(clerk, 86400).access_token}`
const verified = new VerifiedTokenCache<TokenClaims>()
verified.set(header, JSON.parse(Buffer.from(header.split('.')[1] ?? '', 'base64url').toString()) as TokenClaims)
const account = cachedAccount(verified, service.accounts, credentialsRule('secret'), header)
if (account === undefined) throw new Error('the token is not admitted')
const metrics = new ServiceMetrics(service.replica, () => null)
const latency = metrics.recorder('GET', '/v2/authz/check')

/** Nanoseconds per call of `fn`, the median of five runs of `calls` calls. */
function nanos(fn: () => unknown, calls = 500_000): number {
  const runs: number[] = []
  for (let run = 0; run < 5; run++) {
    const started = process.hrtime.bigint()
    for (let i = 0; i < calls; i++) fn()
    runs.push(Number(process.hrtime.bigint() - started) / calls)
  }
  return runs.sort((a, b) => a - b)[2] as number
}

const steps: Array<[string, () => unknown]> = [
  ['token found in the verified cache, account read and checked', () => cachedAccount(verified, service.accounts, credentialsRule('secret'), header)],
  ['query read and checked (obj, act; their patterns)', () => plainQuery('obj=orders&act=read')],
  ['staleness check', () => service.replica.isStale()],
  ['the decision (decision index)', () => checkPermission(service, account, { obj: 'orders', act: 'read', domain: undefined })],
  ['decision counter', () => metrics.decision('check', true)],
  ['latency histogram (series kept, bucket scan)', () => latency(200, 0.0001)],
  ['request id of ours (prefix + counter)', () => nextRequestId()],
  ["client's x-request-id accepted (one regex)", () => acceptedClientRequestId('client-7')],
  ['x-policy-revision text', () => service.replica.revisionText],
  ['clock read (performance.now)', () => performance.now()],
]
process.stdout.write('| step | ns per call |\n|---|---:|\n')
for (const [name, fn] of steps) process.stdout.write(`| ${name} | ${nanos(fn).toFixed(0)} |\n`)

// check-batch's fast path on the bench's 100-check body (bench/seed.ts), beside what the route does instead.
const body = Buffer.from(BATCH)
const spans = newSpans()
const count = readPlainBatch(body, spans)
const checks = (JSON.parse(BATCH) as { data: { checks: Array<{ obj: string; act: string; domain?: string }> } }).data.checks
const batchSteps: Array<[string, () => unknown]> = [
  ['check-batch: the body read (plainBatch.ts)', () => readPlainBatch(body, spans)],
  ['check-batch: its checks decided and the answer written (checkBatchAnswer.ts)', () => checkBatchAnswer(service, account, 'm1', body, spans, count)],
  ["check-batch: the 100 decisions alone (the route's checkPermissions)", () => checkPermissions(service, account, checks)],
  ["check-batch: the route's JSON.parse of the same body", () => JSON.parse(BATCH)],
]
for (const [name, fn] of batchSteps) process.stdout.write(`| ${name} | ${nanos(fn, 20_000).toFixed(0)} |\n`)
process.exit(0)
