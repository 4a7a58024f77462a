import type { Queryable } from './db.js'

export interface SubRole {
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

/** Sub-roles are created on first use, never root. */
export async function ensureSubRole(q: Queryable, code: string): Promise<void> {
  await q.query('INSERT INTO sub_roles (code) VALUES ($1) ON CONFLICT (code) DO NOTHING', [code])
}

export async function listSubRoles(q: Queryable): Promise<SubRole[]> {
  const { rows } = await q.query<SubRole>('SELECT code, is_root FROM sub_roles ORDER BY code')
  return rows
}

export async function subRoleExists(q: Queryable, code: string): Promise<boolean> {
  const { rows } = await q.query('SELECT 1 FROM sub_roles WHERE code = $1', [code])
  return rows.length > 0
}

/** Creates a labelled sub-role; false when the code is taken. */
export async function insertSubRole(q: Queryable, code: string, label: string, createdDomain: string): Promise<boolean> {
  const { rowCount } = await q.query(
    'INSERT INTO sub_roles (code, label, created_domain) VALUES ($1, $2, $3) ON CONFLICT (code) DO NOTHING',
    [code, label, createdDomain],
  )
  return rowCount > 0
}

/**
 * The sub-roles known in a domain, by code: held by an account at home
 * there, granted something there or in `global`, created there or in
 * `global`, or root.
 */
export async function listDomainSubRoles(
  q: Queryable,
  domain: string,
  page: number,
  pageSize: number,
): Promise<{ items: SubRoleSummary[]; total: number }> {
  const { rows } = await q.query<SubRoleSummary & { total: string }>(
    `WITH known AS (
       SELECT sub_role_code AS code FROM admin_accounts WHERE coalesce(merchant_id, 'global') = $1
       UNION SELECT v0 FROM casbin_rule WHERE ptype = 'p' AND v1 IN ($1, 'global')
       UNION SELECT code FROM sub_roles WHERE is_root OR created_domain IN ($1, 'global')
     )
     SELECT s.code, s.label, s.is_root,
            (SELECT count(*) FROM admin_accounts a
              WHERE a.sub_role_code = s.code AND a.status = 'active' AND coalesce(a.merchant_id, 'global') = $1)::int AS members,
            (SELECT count(*) FROM casbin_rule r WHERE r.ptype = 'p' AND r.v0 = s.code AND r.v1 = $1)::int AS rules,
            count(*) OVER () AS total
       FROM sub_roles s JOIN known k ON k.code = s.code
      ORDER BY s.code LIMIT $2 OFFSET $3`,
    [domain, pageSize, (page - 1) * pageSize],
  )
  return { items: rows.map(({ total: _total, ...item }) => item), total: Number(rows[0]?.total ?? 0) }
}
