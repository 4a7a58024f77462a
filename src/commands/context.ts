import type { Actor } from '../domain/audit.js'
import type { Clock } from '../domain/clock.js'
import type { Account } from '../domain/principals.js'
import type { PermissionEngine } from '../engine/engine.js'
import type { PasswordHasher } from '../security/passwords.js'
import type { AccountDirectory } from '../storage/accountDirectory.js'
import type { Database } from '../storage/db.js'
import type { WriteQueue } from './writeQueue.js'

/** What the commands work with; built once by compose.ts. */
export interface CommandContext {
  db: Database
  engine: PermissionEngine
  accounts: AccountDirectory
  passwords: PasswordHasher
  writes: WriteQueue
  /** The time commands read (an override's expiry must lie ahead of it). */
  clock: Clock
  /** SUB_ROLES_EXPLICIT: grants, registrations and sub-role changes must name a sub-role that was created (absent: created on first use). */
  subRolesExplicit?: boolean
}

/** The authenticated admin making a request, and where from. */
export interface Caller {
  account: Account
  ip: string | null
}

export function actorOf(caller: Caller): Actor {
  return { id: caller.account.id, type: caller.account.principal_type, ip: caller.ip }
}
