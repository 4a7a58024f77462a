import { randomUUID } from 'node:crypto'
import type { AuditEntry } from '../domain/audit.js'
import { ServiceError } from '../domain/errors.js'
import { homeDomain, type Account } from '../domain/principals.js'
import { insertAccount, type NewAccount } from '../storage/accounts.js'
import { UNIQUE_VIOLATION, sqlState, violatedConstraint, type Queryable } from '../storage/db.js'
import { insertRule } from '../storage/policyRows.js'
import { ensureSubRole } from '../storage/subRoles.js'
import { ruleAdded, type StoreChange } from '../domain/changes.js'
import type { PlannedWrite } from './writeQueue.js'

export type AccountDraft = Omit<NewAccount, 'id'>

/**
 * Inserts an account with its sub-role assignment (`g, <user>, <sub-role>, <home domain>`)
 * and plans the changes to memory (the account and its `g` row); the audit entry is the caller's to add.
 */
export async function writeAccount(tx: Queryable, draft: AccountDraft): Promise<{ account: Account; changes: StoreChange[] }> {
  await ensureSubRole(tx, homeDomain(draft), draft.sub_role_code)
  let account: Account
  try {
    account = await insertAccount(tx, { id: randomUUID(), ...draft })
  } catch (error) {
    if (sqlState(error) === UNIQUE_VIOLATION && violatedConstraint(error) !== 'admin_accounts_one_super_admin') {
      throw new ServiceError('EMAIL_TAKEN')
    }
    if (sqlState(error) === UNIQUE_VIOLATION) throw new ServiceError('MERCHANT_EXISTS')
    throw error
  }
  const assignment = [account.id, account.sub_role_code, homeDomain(account)]
  await insertRule(tx, 'g', assignment)
  return { account, changes: [{ kind: 'account', account }, ruleAdded('g', assignment)] }
}

export function accountCreated(account: Account, changes: StoreChange[], audit: AuditEntry): PlannedWrite<Account> {
  return { changed: true, audit: [audit], changes, result: account }
}
