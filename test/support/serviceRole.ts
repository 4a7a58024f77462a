import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Queryable } from '../../src/storage/db.js'
import { openPostgres } from '../../src/storage/pg.js'
import { repositoryRoot } from './serverProcess.js'

/** Where the operator's SQL block for the service's role is printed. */
export const SERVICE_ROLE_DOCUMENT = 'docs/operations.md'

/**
 * The SQL block of docs/operations.md that creates the service's role and
 * grants it what it needs, as statements for `role` (with `password`) on
 * `schema`: tests run the service under exactly what an operator copies
 * from that page. (The names keep "readme", where the block was first printed.)
 */
export function readmeServiceRoleStatements(schema: string, role: string, password: string): string[] {
  const document = readFileSync(`${repositoryRoot}/${SERVICE_ROLE_DOCUMENT}`, 'utf8')
  const block = /```sql\n(CREATE ROLE aps_service\b[\s\S]*?)```/.exec(document)?.[1]
  if (block === undefined) throw new Error(`${SERVICE_ROLE_DOCUMENT} has no \`\`\`sql block starting with CREATE ROLE aps_service`)
  return block
    .split(';')
    .map((statement) => statement.replace(/\s+/g, ' ').trim())
    .filter((statement) => statement !== '')
    .map((statement) =>
      statement
        .replace(/\baps_service\b/g, role)
        .replace("PASSWORD '…'", `PASSWORD '${password}'`)
        .replace(/\bSCHEMA public\b/g, `SCHEMA ${schema}`),
    )
}

export interface ServiceRole {
  role: string
  password: string
  /** `url` with this role's credentials and `schema` as its search path. */
  url(base: string): string
}

/**
 * A role of a unique name made with docs/operations.md's statements on `schema`
 * (run through `owner`, whose search path is that schema), dropped when the
 * test ends through a connection of its own to `superuserUrl`.
 */
export async function readmeServiceRole(
  t: { teardown(fn: () => unknown): void },
  owner: Queryable,
  schema: string,
  superuserUrl: string,
): Promise<ServiceRole> {
  const role = `aps_service_${randomBytes(4).toString('hex')}`
  const password = randomBytes(12).toString('hex')
  t.teardown(async () => {
    const admin = openPostgres({ url: superuserUrl, max: 1 })
    try {
      await admin.query(`DROP OWNED BY ${role}`)
      await admin.query(`DROP ROLE ${role}`)
    } finally {
      await admin.close()
    }
  })
  for (const statement of readmeServiceRoleStatements(schema, role, password)) await owner.query(statement)
  return {
    role,
    password,
    url(base) {
      const url = new URL(base)
      url.username = role
      url.password = password
      url.searchParams.set('options', `-c search_path=${schema}`)
      return url.toString()
    },
  }
}
