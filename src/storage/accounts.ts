import type { Account } from '../domain/principals.js'
import type { Queryable } from './db.js'

export interface AccountWithHash extends Account {
  password_hash: string
}

/** An account row to insert: the account's fields with its password hash, the store sets the time. */
export type NewAccount = Omit<AccountWithHash, 'created_at'>

const columns =
  'id::text AS id, email, name, phone, principal_type, merchant_id, sub_role_code, parent_role, created_by::text AS created_by, created_at'

export async function insertAccount(q: Queryable, account: NewAccount): Promise<Account> {
  const { rows } = await q.query<Account>(
    `INSERT INTO admin_accounts (id, email, password_hash, name, phone, principal_type, merchant_id, sub_role_code, parent_role, created_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${columns}`,
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
    "SELECT 1 FROM admin_accounts WHERE merchant_id IS NULL AND sub_role_code = 'super_admin'",
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
