import t from 'tap'

/**
 * Which test files run on both back ends, and which run once.
 *
 * CI runs the test files twice: on the embedded PGlite and on PostgreSQL
 * (DATABASE_URL=postgres://…). A second run only finds something when the
 * back end can change the outcome. The rule:
 *
 * - A file runs on BOTH when its subject is the back end: storage functions,
 *   transactions, migrations, privileges, replicas and the change feed,
 *   database faults, and the commands and routes whose answer is the rows
 *   they write or read (accounts, grants, overrides, audit, login limits).
 * - A file runs ONCE, on PGlite, when its subject is not the back end, even if
 *   it opens a database to get there: pure domain rules, configuration,
 *   command-line parsing, the OpenAPI document, request shapes and transport
 *   (body limits, envelopes, locales, headers, connection limits, path
 *   normalisation, fuzzing), the engine and decision index in memory, the
 *   console in a browser, the gateway, the Dockerfile and the README blocks.
 *   Such a file calls `onceOnPGlite(reason)` before its first test.
 * - A file about PGlite itself (its folder lock) runs on PGlite only, for the
 *   same call; a file about PostgreSQL only (replicas as processes, faults)
 *   skips itself on PGlite with its own reason.
 *
 * The storage functions themselves are covered on both back ends in one run
 * by test/storage/conformance.test.ts, whichever DATABASE_URL is set.
 *
 * On the PostgreSQL run the file plans zero tests, says why, and stops: tap
 * reports it as skipped with the reason. On PGlite it does nothing.
 */
export function onceOnPGlite(reason: string): void {
  if (!process.env.DATABASE_URL?.startsWith('postgres')) return
  t.plan(0, `runs once, on PGlite: ${reason}`)
  // The file's own t.test calls must not run: end the process here. stdout is
  // a pipe under tap, written synchronously, so the plan line is out already.
  process.exit(0)
}

/**
 * The same rule for one subtest of a file that otherwise runs on both: a
 * `skip` option that is false on PGlite and says why on PostgreSQL, for
 * subtests that do not touch DATABASE_URL's database at all (an unreachable
 * address, an embedded store in a folder of their own).
 */
export function pgliteRunOnly(reason: string): false | string {
  return process.env.DATABASE_URL?.startsWith('postgres') ? `runs once, on PGlite: ${reason}` : false
}
