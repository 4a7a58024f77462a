/**
 * A large policy import is one write: its rows go in multi-row statements,
 * the whole file makes one revision and one change-feed row, every change
 * keeps its own audit entry (actor system), and the chain stays whole.
 * Removals of many rows are one write too.
 */
import t from 'tap'
import { importPolicy } from '../../src/commands/importPolicy.js'
import { verifyAudit } from '../../src/commands/verifyAudit.js'
import { headerLines } from '../../src/domain/policyFile.js'
import { currentRevision } from '../../src/storage/revision.js'
import { buildTestService } from '../helper.js'

/** Role rows: ROLES sub-roles × `global` and MERCHANTS merchants × every active pair a merchant may hold. */
const ROLES = 4
const MERCHANTS = 99

const count = async (service: Awaited<ReturnType<typeof buildTestService>>, sql: string) => Number((await service.db.query<{ n: string }>(sql)).rows[0]?.n)

t.test('an import of 6,800 rows makes one revision with one audit entry per row', async (t) => {
  const service = await buildTestService(t)
  await service.db.query("INSERT INTO merchants (id) SELECT 'm' || g FROM generate_series(1, $1::int) AS g", [MERCHANTS])
  const pairs = service.engine.catalogEntries().filter((e) => e.is_active && e.scope !== 'platform')
  const domains = ['global', ...Array.from({ length: MERCHANTS }, (_, i) => `m${i + 1}`)]
  const lines = [...headerLines({ domain: null })]
  for (let r = 0; r < ROLES; r++) for (const d of domains) for (const p of pairs) lines.push(`p, role_${r}, ${d}, ${p.obj}, ${p.act}, allow`)
  const rows = ROLES * domains.length * pairs.length
  t.ok(rows > 5000, `${rows} rows, past one statement's 5,000`)

  const revision = await currentRevision(service.db)
  const audits = await count(service, 'SELECT count(*)::text AS n FROM permission_audit')
  const feedRows = await count(service, 'SELECT count(*)::text AS n FROM store_changes')
  const imported = await importPolicy(service, lines.join('\n'))
  t.equal(imported.applied, true)
  t.equal(imported.diff.added.length, rows)
  t.equal(imported.revision, revision + 1, 'one revision for the whole file')
  t.equal(await currentRevision(service.db), revision + 1)
  t.equal(await count(service, 'SELECT count(*)::text AS n FROM store_changes'), feedRows + 1, 'one change-feed row')
  t.equal(await count(service, "SELECT count(*)::text AS n FROM casbin_rule WHERE ptype = 'p' AND v0 LIKE 'role\\_%'"), rows, 'every row stored')
  t.equal(await count(service, 'SELECT count(*)::text AS n FROM permission_audit'), audits + rows, 'one audit entry per row')
  t.equal(await count(service, "SELECT count(*)::text AS n FROM permission_audit WHERE action = 'grant' AND actor_id = 'system' AND target_id LIKE 'role\\_%'"), rows)
  t.equal(await count(service, "SELECT count(DISTINCT (domain, code))::text AS n FROM sub_roles WHERE code LIKE 'role\\_%'"), ROLES * domains.length, 'each sub-role made where it is used')
  t.equal(service.engine.policy.hasPolicy([`role_${ROLES - 1}`, `m${MERCHANTS}`, pairs[0]?.obj ?? '', pairs[0]?.act ?? '', 'allow']), true, 'memory has the rows')
  t.equal((await verifyAudit(service.db)).problem, null, 'the audit chain is whole')

  const again = await importPolicy(service, lines.join('\n'))
  t.equal(again.applied, false, 'importing the same file again changes nothing')
  t.equal(await currentRevision(service.db), revision + 1)

  // Half the roles' rows gone: one more revision, one revoke entry each.
  const kept = lines.filter((l) => !/^p, role_[0-1],/.test(l))
  const removed = await importPolicy(service, kept.join('\n'), { allowMassRemoval: true })
  t.equal(removed.diff.removed.length, rows / 2)
  t.equal(removed.revision, revision + 2, 'the removals are one revision too')
  t.equal(await count(service, "SELECT count(*)::text AS n FROM casbin_rule WHERE ptype = 'p' AND v0 LIKE 'role\\_%'"), rows / 2)
  t.equal(await count(service, "SELECT count(*)::text AS n FROM permission_audit WHERE action = 'revoke' AND actor_id = 'system'"), rows / 2)
  t.equal(service.engine.policy.hasPolicy(['role_0', 'global', pairs[0]?.obj ?? '', pairs[0]?.act ?? '', 'allow']), false)
  t.equal((await verifyAudit(service.db)).problem, null)
})
