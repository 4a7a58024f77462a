import type { Queryable } from './db.js'

export type TablePrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE'

/**
 * Every table the service uses and what it does to each: the one list that
 * the start-up check reads (and that the GRANT statements in docs/operations.md must
 * cover; a test grants exactly those and starts the service). A migration
 * that adds a table adds it here (a test compares this list with the
 * migrated schema). The sequences behind the tables' serial columns are
 * found from the tables, not listed.
 */
export const TABLE_PRIVILEGES = {
  admin_accounts: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  merchants: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  sub_roles: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  casbin_rule: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  permission_overrides: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  permission_catalog: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  // Locked FOR UPDATE by every write, which needs UPDATE.
  store_revision: ['SELECT', 'UPDATE'],
  schema_migrations: ['SELECT'],
  // Append-only: a trigger refuses UPDATE and DELETE whatever the grants say.
  permission_audit: ['SELECT', 'INSERT'],
  // One row, moved forward by each verification that finds the chain whole.
  audit_checkpoint: ['SELECT', 'UPDATE'],
  // The change feed, pruned from its old end.
  store_changes: ['SELECT', 'INSERT', 'DELETE'],
  // Failed logins per account, pruned once out of the window.
  login_failures: ['SELECT', 'INSERT', 'DELETE'],
  // Networks each account logged in from, refreshed on every success and pruned when old.
  login_successes: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  // Logged-out tokens, deleted once expired.
  ended_tokens: ['SELECT', 'INSERT', 'DELETE'],
  // The change stream's items, pruned past CHANGE_RETENTION_DAYS, and the newest revision pruned.
  change_items: ['SELECT', 'INSERT', 'DELETE'],
  change_horizon: ['SELECT', 'UPDATE'],
  // Decision events, written by the `postgres` sink; whole days are dropped by decision_events_maintain(), which
  // runs as the table's owner.
  decision_events: ['SELECT', 'INSERT'],
} as const satisfies Record<string, readonly TablePrivilege[]>

/** The role the service connects as lacks privileges it needs (each as `PRIVILEGE ON object`). */
export class MissingPrivilegesError extends Error {
  constructor(
    readonly role: string,
    readonly schema: string,
    readonly missing: readonly string[],
  ) {
    super(
      `the database role "${role}" lacks privileges the service needs in schema "${schema}": ${missing.join(', ')} ` +
        "(the GRANT statements for the service's role in docs/operations.md grant them all)",
    )
    this.name = 'MissingPrivilegesError'
  }
}

/**
 * The privileges this connection's role lacks on the service's tables, the
 * sequences of their serial columns and the schema, as `PRIVILEGE ON
 * object`; empty when it has them all. Tables not created yet are left out:
 * the migrations create them as this role, which then owns them.
 * PostgreSQL only (PGlite has a single superuser).
 */
export async function missingPrivileges(q: Queryable): Promise<{ role: string; schema: string; missing: string[] }> {
  const { rows: where } = await q.query<{ role: string; schema: string | null; search_path: string }>(
    "SELECT current_user AS role, current_schema() AS schema, current_setting('search_path') AS search_path",
  )
  const { role, schema, search_path: searchPath } = where[0] as { role: string; schema: string | null; search_path: string }
  // A schema the role may not use drops out of its search path: with none left, current_schema() is null.
  if (schema === null) return { role, schema: searchPath, missing: [`USAGE ON SCHEMA ${searchPath}`] }
  const names: string[] = []
  const privileges: string[] = []
  for (const [table, granted] of Object.entries(TABLE_PRIVILEGES)) {
    for (const privilege of granted) {
      names.push(table)
      privileges.push(privilege)
    }
  }
  const { rows } = await q.query<{ missing: string }>(
    `WITH wanted AS (
       SELECT w.ord, w.name, w.privilege, to_regclass(format('%I.%I', current_schema(), w.name)) AS relation
         FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(name, privilege, ord)
     )
     SELECT missing FROM (
       SELECT privilege || ' ON ' || name AS missing, 1 AS part, ord FROM wanted
        WHERE relation IS NOT NULL AND NOT has_table_privilege(relation, privilege)
       UNION ALL
       SELECT DISTINCT 'USAGE ON SEQUENCE ' || s.relname, 2, 0::bigint
         FROM wanted w
         JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = w.relation
                         AND d.classid = 'pg_class'::regclass AND d.deptype = 'a'
         JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
        -- The CASE keeps the planner from asking has_sequence_privilege() about rows that are not sequences.
        WHERE CASE WHEN s.relkind = 'S' THEN NOT has_sequence_privilege(s.oid, 'USAGE') ELSE false END
     ) AS lacking
     ORDER BY part, ord, missing`,
    [names, privileges],
  )
  return { role, schema, missing: rows.map((r) => r.missing) }
}

/** Refuses to go on (MissingPrivilegesError, naming each) when the role lacks a privilege the service needs. */
export async function requirePrivileges(q: Queryable): Promise<void> {
  const { role, schema, missing } = await missingPrivileges(q)
  if (missing.length > 0) throw new MissingPrivilegesError(role, schema, missing)
}
