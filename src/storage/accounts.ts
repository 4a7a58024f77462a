import { UUID_PATTERN } from '../domain/identifiers.js'
import type { Account, AccountStatus } from '../domain/principals.js'
import type { Queryable } from './db.js'

/** An account is root when its sub-role carries the is_root flag (see ../domain/root.ts); no query names a root sub-role. */
const ROOT_ACCOUNT = 'sub_role_code IN (SELECT code FROM sub_roles WHERE is_root)'

export interface AccountWithHash extends Account {
  password_hash: string
}

/** An account row to insert: the account's fields with its password hash, the store sets the time. */
export type NewAccount = Omit<AccountWithHash, 'created_at' | 'status' | 'credentials_version' | 'credentials_changed_at' | 'must_change_password'> & {
  must_change_password?: boolean
}

const columns =
  'id::text AS id, email, name, phone, principal_type, merchant_id, sub_role_code, parent_role, created_by::text AS created_by, created_at, status, credentials_version, credentials_changed_at, must_change_password'

export async function insertAccount(q: Queryable, account: NewAccount): Promise<Account> {
  const { rows } = await q.query<Account>(
    `INSERT INTO admin_accounts (id, email, password_hash, name, phone, principal_type, merchant_id, sub_role_code, parent_role, created_by, must_change_password)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${columns}`,
    [
      account.id,
      account.email,
      account.password_hash,
      account.name,
      account.phone,
      account.principal_type,
      account.merchant_id,
      account.sub_role_code,
      account.parent_role,
      account.created_by,
      account.must_change_password ?? false,
    ],
  )
  return rows[0] as Account
}

export async function findAccountById(q: Queryable, id: string): Promise<Account | null> {
  const { rows } = await q.query<Account>(`SELECT ${columns} FROM admin_accounts WHERE id = $1`, [id])
  return rows[0] ?? null
}

export async function findAccountByEmail(q: Queryable, email: string): Promise<AccountWithHash | null> {
  const { rows } = await q.query<AccountWithHash>(
    `SELECT ${columns}, password_hash FROM admin_accounts WHERE lower(email) = lower($1)`,
    [email],
  )
  return rows[0] ?? null
}

export async function emailTaken(q: Queryable, email: string): Promise<boolean> {
  const { rows } = await q.query('SELECT 1 FROM admin_accounts WHERE lower(email) = lower($1)', [email])
  return rows.length > 0
}

export async function systemSuperAdminExists(q: Queryable): Promise<boolean> {
  const { rows } = await q.query(
    `SELECT 1 FROM admin_accounts WHERE merchant_id IS NULL AND ${ROOT_ACCOUNT}`,
  )
  return rows.length > 0
}

export async function countAccounts(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM admin_accounts')
  return rows[0]?.n ?? 0
}

/** Streams every account in id order, a page at a time, for the in-memory directory. */
export async function* iterateAccounts(q: Queryable, pageSize = 5000): AsyncGenerator<Account> {
  let after = '00000000-0000-0000-0000-000000000000'
  for (;;) {
    const { rows } = await q.query<Account>(
      `SELECT ${columns} FROM admin_accounts WHERE admin_accounts.id > $1 ORDER BY admin_accounts.id LIMIT $2`,
      [after, pageSize],
    )
    yield* rows
    const last = rows[rows.length - 1]
    if (rows.length < pageSize || last === undefined) return
    after = last.id
  }
}

export interface AccountFilter {
  merchant_id?: string | undefined
  sub_role_code?: string | undefined
  status?: string | undefined
  /** Case-insensitive substring of the e-mail or the name. */
  q?: string | undefined
}

/** Escapes LIKE's wildcards so a search for `50%_off` finds that text. */
function likeSubstring(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

/** One page of accounts, newest first, with the total matching the filters. */
export async function listAccounts(q: Queryable, filter: AccountFilter, page: number, pageSize: number): Promise<{ items: Account[]; total: number }> {
  const where: string[] = []
  const params: unknown[] = []
  const add = (sql: (n: string) => string, value: unknown) => {
    params.push(value)
    where.push(sql(`$${params.length}`))
  }
  if (filter.merchant_id !== undefined) add((n) => `merchant_id = ${n}`, filter.merchant_id)
  if (filter.sub_role_code !== undefined) add((n) => `sub_role_code = ${n}`, filter.sub_role_code)
  if (filter.status !== undefined) add((n) => `status = ${n}`, filter.status)
  if (filter.q !== undefined) add((n) => `(lower(email) LIKE ${n} OR lower(name) LIKE ${n})`, likeSubstring(filter.q))
  const clause = where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''
  const [{ rows }, counted] = await Promise.all([
    q.query<Account>(`SELECT ${columns} FROM admin_accounts ${clause} ORDER BY created_at DESC, id DESC LIMIT ${Number(pageSize)} OFFSET ${Number((page - 1) * pageSize)}`, params),
    q.query<{ n: string }>(`SELECT count(*) AS n FROM admin_accounts ${clause}`, params),
  ])
  return { items: rows, total: Number(counted.rows[0]?.n ?? 0) }
}

/**
 * Moves an account to another sub-role and returns it with the sub-role it
 * had (read under a row lock, so concurrent moves see each other); null when
 * it already had this one. The `g` row is the caller's to move in the same
 * transaction.
 */
export async function setSubRole(tx: Queryable, id: string, subRole: string): Promise<{ account: Account; previous: string } | null> {
  const { rows: locked } = await tx.query<{ sub_role_code: string }>('SELECT sub_role_code FROM admin_accounts WHERE id = $1 FOR UPDATE', [id])
  const previous = locked[0]?.sub_role_code
  if (previous === undefined || previous === subRole) return null
  const { rows } = await tx.query<Account>(`UPDATE admin_accounts SET sub_role_code = $2, updated_at = now() WHERE id = $1 RETURNING ${columns}`, [
    id,
    subRole,
  ])
  const account = rows[0]
  return account === undefined ? null : { account, previous }
}

/**
 * Sets the status; null when it already had it. A deactivation bumps the
 * credentials version, so tokens issued before it stay refused once the
 * account is reactivated; both note the instant (`at`), which refuses an
 * external issuer's tokens issued before it.
 */
export async function setStatus(tx: Queryable, id: string, status: AccountStatus, at: Date): Promise<Account | null> {
  const { rows } = await tx.query<Account>(
    `UPDATE admin_accounts
     SET status = $2, credentials_version = credentials_version + CASE WHEN $2 = 'deactivated' THEN 1 ELSE 0 END,
         credentials_changed_at = $3, updated_at = now()
     WHERE id = $1 AND status <> $2 RETURNING ${columns}`,
    [id, status, at],
  )
  return rows[0] ?? null
}

/**
 * Replaces the password hash, bumps the credentials version and notes the
 * instant, refusing every token issued before; `generated` marks a password
 * the account's owner did not choose.
 */
export async function setPassword(tx: Queryable, id: string, passwordHash: string, at: Date, generated: boolean): Promise<Account | null> {
  const { rows } = await tx.query<Account>(
    `UPDATE admin_accounts SET password_hash = $2, credentials_version = credentials_version + 1, credentials_changed_at = $3,
            must_change_password = $4, updated_at = now()
     WHERE id = $1 RETURNING ${columns}`,
    [id, passwordHash, at, generated],
  )
  return rows[0] ?? null
}

/** Logout everywhere: bumps the credentials version and notes the instant, refusing every token issued before, ours or an external issuer's. */
export async function endAllTokens(tx: Queryable, id: string, at: Date): Promise<Account | null> {
  const { rows } = await tx.query<Account>(
    `UPDATE admin_accounts SET credentials_version = credentials_version + 1, credentials_changed_at = $2, updated_at = now()
     WHERE id = $1 RETURNING ${columns}`,
    [id, at],
  )
  return rows[0] ?? null
}

export async function findAccountWithHash(q: Queryable, id: string): Promise<AccountWithHash | null> {
  const { rows } = await q.query<AccountWithHash>(`SELECT ${columns}, password_hash FROM admin_accounts WHERE id = $1`, [id])
  return rows[0] ?? null
}

/** Active system-owner root accounts other than `except`, locked so two deactivations cannot both pass. */
export async function otherActiveSystemRoots(tx: Queryable, except: string): Promise<number> {
  const { rows } = await tx.query<{ id: string }>(
    `SELECT id::text AS id FROM admin_accounts WHERE merchant_id IS NULL AND ${ROOT_ACCOUNT} AND status = 'active' AND id <> $1 FOR UPDATE`,
    [except],
  )
  return rows.length
}

/** Who an account is, for people reading a list of ids (the audit trail). */
export interface AccountName {
  id: string
  email: string
  name: string
  merchant_id: string | null
}

/** The names of the accounts among `ids` (ids that name no account, such as `system`, are left out). */
export async function accountNames(q: Queryable, ids: readonly string[]): Promise<AccountName[]> {
  const uuids = [...new Set(ids)].filter((id) => UUID.test(id))
  if (uuids.length === 0) return []
  const { rows } = await q.query<AccountName>('SELECT id::text AS id, email, name, merchant_id FROM admin_accounts WHERE id = ANY($1::uuid[])', [uuids])
  return rows
}

const UUID = new RegExp(UUID_PATTERN)
