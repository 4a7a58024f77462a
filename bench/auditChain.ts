import type { Queryable } from '../src/storage/db.js'

/**
 * Appends `count` audit rows to the chain in one statement, each hashed as
 * `rowHash` hashes it (the same canonical JSON, SHA-256 over the previous
 * hash, a newline and that JSON), and moves the head to the last one. A
 * recursive query carries each row's hash into the next, so a large trail
 * is made by the database in one round trip instead of one write per row.
 * The content is fixed ASCII so that the JSON built here needs no escaping.
 */
export async function appendChainedAuditRows(q: Queryable, count: number): Promise<void> {
  await q.query(
    `WITH RECURSIVE start AS (
       SELECT COALESCE((SELECT max(id) FROM permission_audit), 0) AS id, audit_head AS hash FROM store_revision WHERE id = 1
     ), chain(n, id, prev_hash, row_hash, ms) AS (
       SELECT 0, id, hash, hash, 0::bigint FROM start
       UNION ALL
       SELECT n + 1, id + 1, row_hash,
              encode(sha256(convert_to(row_hash || E'\\n' ||
                '["' || (id + 1) || '","grant","role","clerk","orders","read","m1","m1","bench-actor","system",null,' ||
                (1700000000000 + (n + 1) * 1000) || ']', 'UTF8')), 'hex'),
              1700000000000 + (n + 1) * 1000
       FROM chain WHERE n < $1::int
     ), inserted AS (
       INSERT INTO permission_audit (id, action, target_type, target_id, obj, act, domain, merchant_id, actor_id, actor_type, ip, created_at, prev_hash, row_hash)
       SELECT id, 'grant', 'role', 'clerk', 'orders', 'read', 'm1', 'm1', 'bench-actor', 'system', NULL,
              timestamptz 'epoch' + ms * interval '1 millisecond', prev_hash, row_hash
       FROM chain WHERE n > 0
       RETURNING id, row_hash
     )
     UPDATE store_revision SET audit_head = (SELECT row_hash FROM inserted ORDER BY id DESC LIMIT 1) WHERE id = 1`,
    [count],
  )
  await q.query("SELECT setval(pg_get_serial_sequence('permission_audit', 'id'), (SELECT max(id) FROM permission_audit))")
}

/**
 * What `work` returned, how long it took, and the longest gap between the
 * turns of a 1 ms timer while it ran (and how many turns there were). The
 * timer is read once more after the work, so work that never lets it fire
 * still shows its whole length as a stall.
 */
export async function measureStall<T>(work: () => Promise<T>): Promise<{ result: T; stall: number; took: number; turns: number }> {
  let last = performance.now()
  let stall = 0
  let turns = 0
  const timer = setInterval(() => {
    const now = performance.now()
    stall = Math.max(stall, now - last)
    last = now
    turns++
  }, 1)
  const started = performance.now()
  const result = await work()
  const took = performance.now() - started
  await new Promise((resolve) => setTimeout(resolve, 5))
  clearInterval(timer)
  return { result, stall, took, turns }
}
