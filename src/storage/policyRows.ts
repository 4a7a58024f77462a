import { ascendingIds, auditIdsSql, takeAuditIds } from './audit.js'
import { BULK_AUDIT_ROWS, copyField } from './bulkWrite.js'
import type { Queryable } from './db.js'
import { Params, withParts } from './statement.js'
import { ensureSubRolesSql } from './subRoles.js'

/** Rows of the standard `casbin_rule` table: `p` grants and `g` role assignments. */
export type PolicyType = 'p' | 'g'

const FIELD_COUNT = 6

function padded(values: readonly string[]): string[] {
  if (values.length > FIELD_COUNT) throw new Error(`a policy rule has at most ${FIELD_COUNT} fields`)
  return [...values, ...Array<string>(FIELD_COUNT - values.length).fill('')]
}

/** Inserts the rule; false when it was already stored. */
export async function insertRule(tx: Queryable, ptype: PolicyType, values: readonly string[]): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4, v5) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (ptype, v0, v1, v2, v3, v4, v5) DO NOTHING`,
    [ptype, ...padded(values)],
  )
  return rowCount > 0
}

/** Deletes exactly the rule given (no patterns); false when it was not stored. */
export async function deleteRule(tx: Queryable, ptype: PolicyType, values: readonly string[]): Promise<boolean> {
  const { rowCount } = await tx.query(
    `DELETE FROM casbin_rule WHERE ptype = $1 AND v0 = $2 AND v1 = $3 AND v2 = $4 AND v3 = $5 AND v4 = $6 AND v5 = $7`,
    [ptype, ...padded(values)],
  )
  return rowCount > 0
}

/** Rows per statement of a multi-row write: well under PostgreSQL's parameter and message limits. */
const ROWS_PER_STATEMENT = 5000

/** `rows` as six text arrays, v0…v5, for unnest. */
function columnsOf(rows: readonly (readonly string[])[]): string[][] {
  const columns: string[][] = Array.from({ length: FIELD_COUNT }, () => [])
  for (const row of rows) for (const [i, value] of padded(row).entries()) (columns[i] as string[]).push(value)
  return columns
}

const keyOf = (fields: readonly string[]): string => padded(fields).join('\u0000')

/** The statements of insertRules and deleteRules, the rows' six columns (v0…v5, text arrays) as `columns` gives them. */
const rowsSql = {
  insert: (ptype: string, columns: string) => `INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4, v5)
     SELECT ${ptype}, * FROM unnest(${columns})
     ON CONFLICT (ptype, v0, v1, v2, v3, v4, v5) DO NOTHING
     RETURNING v0, v1, v2, v3, v4, v5`,
  delete: (ptype: string, columns: string) => `DELETE FROM casbin_rule r USING unnest(${columns}) AS u(v0, v1, v2, v3, v4, v5)
     WHERE r.ptype = ${ptype} AND r.v0 = u.v0 AND r.v1 = u.v1 AND r.v2 = u.v2 AND r.v3 = u.v3 AND r.v4 = u.v4 AND r.v5 = u.v5
     RETURNING r.v0, r.v1, r.v2, r.v3, r.v4, r.v5`,
}

/** The six columns of `rules` as parameters of `params`, for unnest. */
const columnParams = (params: Params, rules: readonly (readonly string[])[]): string =>
  columnsOf(rules)
    .map((column) => params.add(column, '::text[]'))
    .join(', ')

/**
 * insertRule for many rules, ROWS_PER_STATEMENT per statement (INSERT ...
 * SELECT FROM unnest): for each rule, in order, whether it was inserted
 * (false when it was already stored or repeated).
 */
export async function insertRules(tx: Queryable, ptype: PolicyType, rules: readonly (readonly string[])[]): Promise<boolean[]> {
  if (tx.copyFrom !== undefined && rules.length > BULK_AUDIT_ROWS) return insertCopiedRules(tx, ptype, rules)
  return writeRules(tx, rules, rowsSql.insert, ptype)
}

/** The table insertCopiedRules copies the rules into, dropped when it is done. */
const COPIED_RULES = 'copied_rules'

/** The rules as COPY lines (their place in the list, then v0…v5), a chunk per ROWS_PER_STATEMENT. */
function* ruleLines(rules: readonly (readonly string[])[]): Generator<string> {
  for (let start = 0; start < rules.length; start += ROWS_PER_STATEMENT) {
    const lines = rules.slice(start, start + ROWS_PER_STATEMENT).map((rule, i) => `${start + i}\t${padded(rule).map(copyField).join('\t')}`)
    yield `${lines.join('\n')}\n`
  }
}

const sameKey = (a: string, b: string) => ['v0', 'v1', 'v2', 'v3', 'v4', 'v5'].map((v) => `${a}.${v} = ${b}.${v}`).join(' AND ')

/**
 * insertRules for a list of many rules, on a store that takes COPY: the
 * rules copied into a temporary table and inserted from it in one
 * statement, which answers with the places of the rules it did not insert
 * (stored already, or repeated) instead of every inserted row's key. When
 * every rule went in (an import of new rows), that list is empty and the
 * comparison behind it is never made.
 */
async function insertCopiedRules(tx: Queryable, ptype: PolicyType, rules: readonly (readonly string[])[]): Promise<boolean[]> {
  const copyFrom = tx.copyFrom?.bind(tx)
  if (copyFrom === undefined) throw new Error('insertCopiedRules needs a store that takes COPY FROM STDIN')
  await tx.query(`CREATE TEMPORARY TABLE ${COPIED_RULES} (i integer, v0 text, v1 text, v2 text, v3 text, v4 text, v5 text) ON COMMIT DROP`)
  await copyFrom(`${COPIED_RULES} (i, v0, v1, v2, v3, v4, v5)`, ruleLines(rules))
  // The skipped rules are looked for only when fewer rows went in than were given (a one-time filter).
  const { rows } = await tx.query<{ i: number }>(
    `WITH inserted AS (
       INSERT INTO casbin_rule (ptype, v0, v1, v2, v3, v4, v5)
       SELECT $1, v0, v1, v2, v3, v4, v5 FROM ${COPIED_RULES} ORDER BY i
       ON CONFLICT (ptype, v0, v1, v2, v3, v4, v5) DO NOTHING
       RETURNING v0, v1, v2, v3, v4, v5
     )
     SELECT c.i FROM (SELECT *, row_number() OVER (PARTITION BY v0, v1, v2, v3, v4, v5 ORDER BY i) AS nth FROM ${COPIED_RULES}) c
     WHERE (SELECT count(*) FROM inserted) < (SELECT count(*) FROM ${COPIED_RULES})
       AND (c.nth > 1 OR NOT EXISTS (SELECT 1 FROM inserted WHERE ${sameKey('inserted', 'c')}))`,
    [ptype],
  )
  await tx.query(`DROP TABLE ${COPIED_RULES}`)
  const inserted = rules.map(() => true)
  for (const { i } of rows) inserted[i] = false
  return inserted
}

/** deleteRule for many rules, ROWS_PER_STATEMENT per statement: for each rule, in order, whether it was stored and is now gone. */
export async function deleteRules(tx: Queryable, ptype: PolicyType, rules: readonly (readonly string[])[]): Promise<boolean[]> {
  return writeRules(tx, rules, rowsSql.delete, ptype)
}

/** Runs a multi-row statement over `rules` in parts; a rule counts once, at its first place in the list. */
async function writeRules(tx: Queryable, rules: readonly (readonly string[])[], sql: (ptype: string, columns: string) => string, ptype: PolicyType): Promise<boolean[]> {
  const done = new Set<string>()
  for (let start = 0; start < rules.length; start += ROWS_PER_STATEMENT) {
    const params = new Params()
    const text = sql(params.add(ptype), columnParams(params, rules.slice(start, start + ROWS_PER_STATEMENT)))
    const { rows } = await tx.query<Record<'v0' | 'v1' | 'v2' | 'v3' | 'v4' | 'v5', string>>(text, params.values)
    for (const r of rows) done.add(keyOf([r.v0, r.v1, r.v2, r.v3, r.v4, r.v5]))
  }
  return rules.map((rule) => done.delete(keyOf(rule)))
}

/** A role's `p` row to add (its sub-role made where it is used, as ensureSubRole does) or to remove. */
export interface RoleRowWrite {
  rule: readonly string[]
  remove: boolean
}

/**
 * Role rows added and removed in one statement: the sub-roles the added rows
 * need, the rows added, the rows removed. The parts run on one snapshot, so
 * no rule may come twice (a later write of a rule must see the earlier one:
 * the caller splits a list there); rules per call are bounded by the caller
 * (a shared transaction, a bulk list). For each row, in order, whether it
 * changed the store.
 */
export async function writeRoleRows(tx: Queryable, rows: readonly RoleRowWrite[]): Promise<boolean[]> {
  return (await writeRoleRowsTakingAuditIds(tx, rows, 0)).changed
}

/**
 * writeRoleRows, and in the same statement the next `auditIds` audit row ids
 * (as takeAuditIds takes them): a shared transaction of role rows learns
 * which changed and has the ids to chain their audit rows with, in one round
 * trip instead of two. Ids a write that changed nothing does not use are a
 * gap in the ids, as a rolled-back write leaves one.
 */
export async function writeRoleRowsTakingAuditIds(tx: Queryable, rows: readonly RoleRowWrite[], auditIds: number): Promise<{ changed: boolean[]; auditIds: string[] }> {
  if (rows.length === 0) return { changed: [], auditIds: await takeAuditIds(tx, auditIds) }
  const added = rows.filter((r) => !r.remove).map((r) => r.rule)
  const removed = rows.filter((r) => r.remove).map((r) => r.rule)
  const params = new Params()
  const ptype = params.add('p')
  const parts = [
    ...(added.length > 0
      ? [
          `role_rows_ensured AS (${ensureSubRolesSql(params, added.map((rule) => ({ code: rule[0] ?? '', domain: rule[1] ?? '' })))})`,
          `role_rows_added AS (${rowsSql.insert(ptype, columnParams(params, added))})`,
        ]
      : []),
    ...(removed.length > 0 ? [`role_rows_removed AS (${rowsSql.delete(ptype, columnParams(params, removed))})`] : []),
    ...(auditIds > 0 ? [auditIdsSql(params, auditIds)] : []),
  ]
  const selected = [
    ...(added.length > 0 ? ['SELECT *, NULL::text AS audit_id FROM role_rows_added'] : []),
    ...(removed.length > 0 ? ['SELECT *, NULL::text AS audit_id FROM role_rows_removed'] : []),
    ...(auditIds > 0 ? ['SELECT NULL, NULL, NULL, NULL, NULL, NULL, id FROM audit_ids'] : []),
  ]
  const { rows: done } = await tx.query<Record<'v0' | 'v1' | 'v2' | 'v3' | 'v4' | 'v5', string> & { audit_id: string | null }>(
    withParts(parts, selected.join(' UNION ALL ')),
    params.values,
  )
  const keys = new Set(done.flatMap((r) => (r.audit_id === null ? [keyOf([r.v0, r.v1, r.v2, r.v3, r.v4, r.v5])] : [])))
  return { changed: rows.map((r) => keys.has(keyOf(r.rule))), auditIds: ascendingIds(done.flatMap((r) => (r.audit_id === null ? [] : [r.audit_id]))) }
}

export interface RuleRow {
  ptype: string
  fields: string[]
}

/** Columns of the page query: v0…v5, then ptype and id. */
const FIELDS_END = 6
const PTYPE = 6
const ID = 7

/** The row's v0…v5 in place, without the empty padding: storage drops trailing empty columns. */
function trimmed(row: (string | null)[]): string[] {
  let end = FIELDS_END
  while (end > 0 && !row[end - 1]) end--
  row.length = end
  for (let i = 0; i < end; i++) row[i] ??= ''
  return row as string[]
}

/** With a domain: only the p and g rows of that domain and of `global`, `domain` being the SQL for it. */
const domainFilter = (domain: string) => `AND ((ptype = 'p' AND v1 IN (${domain}, 'global')) OR (ptype = 'g' AND v2 IN (${domain}, 'global')))`

/**
 * Streams `casbin_rule` in id order a page at a time. With `domain`, only the
 * p and g rows of that domain and of `global`: exactly what the model reads to
 * decide in that domain (platform staff reach their roles through `global`).
 * On PostgreSQL the rows come through `COPY ... TO STDOUT`; elsewhere as
 * pages of rows.
 */
export function iterateRulePages(q: Queryable, options: { domain?: string; pageSize?: number } = {}): AsyncGenerator<RuleRow[]> {
  return q.copyText !== undefined ? copiedRulePages(q.copyText.bind(q), options) : queriedRulePages(q, options)
}

/**
 * Pages of rows as query answers. The next page is asked for before this one
 * is handed out, so the database reads it while the caller works through
 * this one (a load of a million rows spends most of its time on our side of
 * the connection).
 */
async function* queriedRulePages(q: Queryable, options: { domain?: string; pageSize?: number }): AsyncGenerator<RuleRow[]> {
  const pageSize = options.pageSize ?? 10000
  const filter = options.domain === undefined ? '' : domainFilter('$3')
  // The id last, so that the row's own array, cut to its fields, is the rule: no second array per row.
  const ask = (after: string): Promise<unknown[][]> => {
    const params: unknown[] = [after, pageSize]
    if (options.domain !== undefined) params.push(options.domain)
    return q.queryArrays(
      `SELECT v0, v1, v2, v3, v4, v5, ptype, id::text FROM casbin_rule
       WHERE casbin_rule.id > $1::bigint ${filter} ORDER BY casbin_rule.id LIMIT $2`,
      params,
    )
  }
  let pending: Promise<unknown[][]> | null = ask('0')
  try {
    while (pending !== null) {
      const rows: unknown[][] = await pending
      const last = rows[rows.length - 1]
      pending = rows.length < pageSize || last === undefined ? null : ask(last[ID] as string)
      const page = new Array<RuleRow>(rows.length)
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i] as (string | null)[]
        const ptype = row[PTYPE] ?? ''
        page[i] = { ptype, fields: trimmed(row) }
      }
      yield page
    }
  } finally {
    // A caller that stops early leaves the page asked for ahead: it settles before the caller's transaction goes on.
    await pending?.catch(() => undefined)
  }
}

/**
 * Rows per COPY: each is one statement, so a table of any size stays within
 * the statement timeout, and the few round trips between them do not count.
 */
const COPY_PAGE_ROWS = 100_000

/** A text literal in the one statement that takes no parameters: E'' reads backslashes the same under any standard_conforming_strings. */
function literal(value: string): string {
  return `E'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`
}

const COPY_ESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' }

/** One column of COPY's text format: `\N` is null; PostgreSQL escapes only a backslash and the control characters above. */
function copiedValue(column: string): string | null {
  if (column === '\\N') return null
  if (!column.includes('\\')) return column
  return column.replace(/\\(.)/gs, (_, escaped: string) => COPY_ESCAPES[escaped] ?? escaped)
}

/** The rows of whole lines of COPY text, the last row's id in `after`. */
function copiedPage(text: string, cursor: { after: string }): RuleRow[] {
  const lines = text.split('\n')
  const page = new Array<RuleRow>(lines.length)
  for (let i = 0; i < lines.length; i++) {
    // The split's own array becomes the row, cut to its fields: no second array per row.
    const row: (string | null)[] = (lines[i] as string).split('\t')
    if (row.length !== ID + 1) throw new Error(`a COPY of casbin_rule gave a row of ${row.length} columns`)
    for (let c = 0; c <= ID; c++) row[c] = copiedValue(row[c] as string)
    cursor.after = row[ID] as string
    page[i] = { ptype: row[PTYPE] ?? '', fields: trimmed(row) }
  }
  return page
}

/**
 * The same rows as `COPY (SELECT ...) TO STDOUT`, a page per chunk of whole
 * lines as it arrives. A line never splits inside a character: a newline
 * byte is never part of a multi-byte UTF-8 sequence.
 */
async function* copiedRulePages(copyText: (select: string) => AsyncIterable<Buffer>, options: { domain?: string; pageSize?: number }): AsyncGenerator<RuleRow[]> {
  const pageSize = options.pageSize ?? COPY_PAGE_ROWS
  const filter = options.domain === undefined ? '' : domainFilter(literal(options.domain))
  const cursor = { after: '0' }
  for (;;) {
    let rows = 0
    let rest: Buffer | null = null
    const select = `SELECT v0, v1, v2, v3, v4, v5, ptype, id FROM casbin_rule
       WHERE casbin_rule.id > ${cursor.after}::bigint ${filter} ORDER BY casbin_rule.id LIMIT ${pageSize}`
    for await (const chunk of copyText(select)) {
      const end = chunk.lastIndexOf(0x0a)
      if (end < 0) {
        rest = rest === null ? Buffer.from(chunk) : Buffer.concat([rest, chunk])
        continue
      }
      const lines = rest === null ? chunk.subarray(0, end) : Buffer.concat([rest, chunk.subarray(0, end)])
      rest = end + 1 < chunk.length ? Buffer.from(chunk.subarray(end + 1)) : null
      const page = copiedPage(lines.toString('utf8'), cursor)
      rows += page.length
      yield page
    }
    if (rest !== null) throw new Error('a COPY of casbin_rule ended inside a row')
    if (rows < pageSize) return
  }
}

/** iterateRulePages, a row at a time. */
export async function* iterateRules(q: Queryable, options: { domain?: string; pageSize?: number } = {}): AsyncGenerator<RuleRow> {
  for await (const page of iterateRulePages(q, options)) yield* page
}
