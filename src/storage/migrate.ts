import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { Database } from './db.js'

const defaultDir = fileURLToPath(new URL('../../sql/', import.meta.url))

export interface Migration {
  version: string
  sql: string
}

export function readMigrations(dir = defaultDir): Migration[] {
  return readdirSync(dir)
    .filter((name) => /^\d{3}_[\w-]+\.sql$/.test(name))
    .sort()
    .map((name) => ({ version: name.replace(/\.sql$/, ''), sql: readFileSync(`${dir}/${name}`, 'utf8') }))
}

/**
 * Applies the numbered migrations not applied yet, in one transaction under
 * an advisory lock scoped to the current schema, so instances that start
 * together apply each file once. Returns the versions it applied.
 */
export async function migrate(db: Database, migrations = readMigrations()): Promise<string[]> {
  // Up to date: nothing to lock or create, so a service role without DDL rights starts too.
  const { rows: existing } = await db.query<{ exists: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists")
  if (existing[0]?.exists === true) {
    const { rows } = await db.query<{ version: string }>('SELECT version FROM schema_migrations')
    const applied = new Set(rows.map((r) => r.version))
    if (migrations.every((m) => applied.has(m.version))) return []
  }
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':migrations'))")
    await tx.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    )
    const { rows } = await tx.query<{ version: string }>('SELECT version FROM schema_migrations')
    const applied = new Set(rows.map((r) => r.version))
    const fresh = migrations.filter((m) => !applied.has(m.version))
    for (const migration of fresh) {
      await tx.exec(migration.sql)
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [migration.version])
    }
    return fresh.map((m) => m.version)
  })
}

