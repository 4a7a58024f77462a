import type { Queryable } from './db.js'
import { Params } from './statement.js'

export interface SubRole {
  domain: string
  code: string
  is_root: boolean
}

/** A sub-role as the list shows it in one domain. */
export interface SubRoleSummary {
  code: string
  label: string | null
  is_root: boolean
  /** Active accounts at home in the domain that hold it. */
  members: number
  /** Its grants in the domain. */
  rules: number
}

/**
 * Sub-roles are created on first use, never root, in the domain where they
 * are used; a code already known there (its own or a `global` template) is
 * not made again, so a template's label is not hidden by an empty one.
 */
export async function ensureSubRole(q: Queryable, domain: string, code: string): Promise<void> {
  await q.query(
    `INSERT INTO sub_roles (domain, code) SELECT $1, $2
      WHERE NOT EXISTS (SELECT 1 FROM sub_roles WHERE code = $2 AND domain IN ($1, 'global'))
     ON CONFLICT (domain, code) DO NOTHING`,
    [domain, code],
  )
}

/** ensureSubRole for many (domain, code) pairs in one statement. */
export async function ensureSubRoles(q: Queryable, pairs: ReadonlyArray<{ domain: string; code: string }>): Promise<void> {
  if (pairs.length === 0) return
  const params = new Params()
  await q.query(ensureSubRolesSql(params, pairs), params.values)
}

/** ensureSubRoles' statement, its parameters added to `params`: alone, or a part of a larger one. */
export function ensureSubRolesSql(params: Params, pairs: ReadonlyArray<{ domain: string; code: string }>): string {
  return `INSERT INTO sub_roles (domain, code)
     SELECT DISTINCT u.domain, u.code FROM unnest(${params.add(pairs.map((p) => p.domain), '::text[]')}, ${params.add(pairs.map((p) => p.code), '::text[]')}) AS u(domain, code)
      WHERE NOT EXISTS (SELECT 1 FROM sub_roles s WHERE s.code = u.code AND s.domain IN (u.domain, 'global'))
     ON CONFLICT (domain, code) DO NOTHING`
}

/** Every stored sub-role (of every domain), with its root flag: what the engine loads. */
export async function listSubRoles(q: Queryable): Promise<SubRole[]> {
  const { rows } = await q.query<SubRole>('SELECT domain, code, is_root FROM sub_roles ORDER BY domain, code')
  return rows
}

/** Whether a code is known in a domain: created there, or a `global` template. */
export async function subRoleKnownIn(q: Queryable, domain: string, code: string): Promise<boolean> {
  const { rows } = await q.query("SELECT 1 FROM sub_roles WHERE code = $2 AND domain IN ($1, 'global')", [domain, code])
  return rows.length > 0
}

/** Creates a labelled sub-role in a domain; false when that domain has the code already. */
export async function insertSubRole(q: Queryable, domain: string, code: string, label: string): Promise<boolean> {
  const { rowCount } = await q.query(
    'INSERT INTO sub_roles (domain, code, label) VALUES ($1, $2, $3) ON CONFLICT (domain, code) DO NOTHING',
    [domain, code, label],
  )
  return rowCount > 0
}

/**
 * The sub-roles known in a domain, by code: its own and `global`'s (a
 * template is known everywhere), and any code held by an account at home
 * there or granted something there or in `global`. The domain's label wins
 * over the template's; members and rules are counted in the domain only, so
 * nothing of another merchant's sub-roles is read.
 */
export async function listDomainSubRoles(
  q: Queryable,
  domain: string,
  page: number,
  pageSize: number,
): Promise<{ items: SubRoleSummary[]; total: number }> {
  const { rows } = await q.query<SubRoleSummary & { total: string }>(
    `WITH known AS (
       SELECT code FROM sub_roles WHERE domain IN ($1, 'global')
       UNION SELECT sub_role_code FROM admin_accounts WHERE coalesce(merchant_id, 'global') = $1
       UNION SELECT v0 FROM casbin_rule WHERE ptype = 'p' AND v1 IN ($1, 'global')
     )
     SELECT k.code, coalesce(own.label, template.label) AS label, coalesce(template.is_root, false) AS is_root,
            (SELECT count(*) FROM admin_accounts a
              WHERE a.sub_role_code = k.code AND a.status = 'active' AND coalesce(a.merchant_id, 'global') = $1)::int AS members,
            (SELECT count(*) FROM casbin_rule r WHERE r.ptype = 'p' AND r.v0 = k.code AND r.v1 = $1)::int AS rules,
            count(*) OVER () AS total
       FROM known k
       LEFT JOIN sub_roles own ON own.domain = $1 AND own.code = k.code
       LEFT JOIN sub_roles template ON template.domain = 'global' AND template.code = k.code
      ORDER BY k.code LIMIT $2 OFFSET $3`,
    [domain, pageSize, (page - 1) * pageSize],
  )
  return { items: rows.map(({ total: _total, ...item }) => item), total: Number(rows[0]?.total ?? 0) }
}
