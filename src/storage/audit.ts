import type { AuditEntry } from '../domain/audit.js'
import type { Queryable } from './db.js'

/** Appends one audit row; callers pass their transaction so the row commits with the change. */
export async function insertAudit(tx: Queryable, entry: AuditEntry): Promise<void> {
  await tx.query(
    `INSERT INTO permission_audit (action, target_type, target_id, obj, act, domain, actor_id, actor_type, ip)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      entry.action,
      entry.target_type,
      entry.target_id,
      entry.obj,
      entry.act,
      entry.domain,
      entry.actor.id,
      entry.actor.type,
      entry.actor.ip,
    ],
  )
}
