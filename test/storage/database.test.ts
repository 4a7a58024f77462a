import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { writeAccount, type AccountDraft } from '../../src/commands/accountRows.js'
import { ServiceError } from '../../src/domain/errors.js'
import { insertAccount } from '../../src/storage/accounts.js'
import { UNIQUE_VIOLATION, sqlState, violatedConstraint, type Database } from '../../src/storage/db.js'
import { migrate } from '../../src/storage/migrate.js'
import { backend, freshDatabase } from '../helper.js'

/** The error a promise rejects with (the test fails when it resolves). */
async function failure(t: Test, work: Promise<unknown>): Promise<unknown> {
  try {
    await work
  } catch (error) {
    return error
  }
  t.fail('expected the statement to fail')
  return undefined
}

const systemOwner = (email: string): AccountDraft => ({
  email,
  password_hash: 'not-a-real-hash',
  name: email,
  phone: null,
  principal_type: 'system_owner',
  merchant_id: null,
  sub_role_code: 'super_admin',
  parent_role: null,
  created_by: null,
})

t.test(`the database interface on ${backend}`, async (t) => {
  const db: Database = await freshDatabase(t)
  t.equal(db.kind, backend)
  await migrate(db)
  await db.exec('CREATE TABLE scratch (id int PRIMARY KEY, note text); CREATE TABLE scratch_log (line text)')

  t.test('query returns rows and rowCount', async (t) => {
    const inserted = await db.query('INSERT INTO scratch VALUES (1, $1), (2, $2)', ['one', 'two'])
    t.equal(inserted.rowCount, 2, 'INSERT counts its rows')
    t.same(inserted.rows, [])
    const returning = await db.query<{ id: number }>('INSERT INTO scratch VALUES (3, $1) RETURNING id', ['three'])
    t.same(returning.rows, [{ id: 3 }])
    t.equal(returning.rowCount, 1)
    const updated = await db.query("UPDATE scratch SET note = note || '!' WHERE id >= $1", [2])
    t.equal(updated.rowCount, 2, 'UPDATE counts its rows')
    const none = await db.query('UPDATE scratch SET note = $1 WHERE id = 99', ['x'])
    t.equal(none.rowCount, 0, 'nothing matched: 0')
    const { rows, rowCount } = await db.query<{ id: number; note: string }>('SELECT id, note FROM scratch ORDER BY id')
    t.same(rows, [
      { id: 1, note: 'one' },
      { id: 2, note: 'two!' },
      { id: 3, note: 'three!' },
    ])
    t.equal(rowCount, 3, 'SELECT counts its rows')
    const typed = await db.query<{ n: number; b: boolean; s: string | null }>('SELECT 2::int AS n, true AS b, NULL::text AS s')
    t.same(typed.rows, [{ n: 2, b: true, s: null }], 'ints, booleans and nulls come back typed')
    const deleted = await db.query('DELETE FROM scratch WHERE id = ANY($1::int[])', [[1, 2, 3]])
    t.equal(deleted.rowCount, 3, 'DELETE counts its rows; arrays bind as parameters')
  })

  t.test('transaction commits on resolve, rolls back on throw', async (t) => {
    const value = await db.transaction(async (tx) => {
      await tx.query('INSERT INTO scratch VALUES (10, $1)', ['kept'])
      await tx.exec("INSERT INTO scratch_log VALUES ('a'); INSERT INTO scratch_log VALUES ('b')")
      return 'done'
    })
    t.equal(value, 'done', 'the value of the work is returned')
    await t.rejects(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO scratch VALUES (11, $1)', ['rolled back'])
        await tx.exec("INSERT INTO scratch_log VALUES ('c')")
        throw new Error('boom')
      }),
      /boom/,
      'the error of the work comes out',
    )
    const statementFailure = await failure(
      t,
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO scratch VALUES (12, $1)', ['rolled back too'])
        await tx.query('INSERT INTO scratch VALUES (10, $1)', ['duplicate'])
      }),
    )
    t.equal(sqlState(statementFailure), UNIQUE_VIOLATION, 'a failing statement rolls back the whole transaction')
    const { rows } = await db.query<{ id: number }>('SELECT id FROM scratch WHERE id >= 10 ORDER BY id')
    t.same(rows, [{ id: 10 }], 'only the committed row')
    const { rows: log } = await db.query<{ line: string }>('SELECT line FROM scratch_log ORDER BY line')
    t.same(log, [{ line: 'a' }, { line: 'b' }], 'exec inside a transaction follows it')

    // After failures the database is not left inside an aborted transaction.
    await db.transaction((tx) => tx.query('INSERT INTO scratch VALUES (13, $1)', ['after']))
    t.same((await db.query('SELECT id FROM scratch WHERE id = 13')).rows, [{ id: 13 }])
  })

  t.test('concurrent transactions each keep their own outcome', async (t) => {
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        db
          .transaction(async (tx) => {
            await tx.query('INSERT INTO scratch VALUES ($1, $2)', [100 + i, 'parallel'])
            if (i % 2 === 1) throw new Error('odd ones roll back')
          })
          .catch(() => undefined),
      ),
    )
    const { rows } = await db.query<{ id: number }>("SELECT id FROM scratch WHERE note = 'parallel' ORDER BY id")
    t.same(rows.map((r) => r.id), [100, 102, 104, 106, 108])
  })

  t.test('a unique violation reports SQLSTATE 23505 and the constraint', async (t) => {
    const primary = await failure(t, db.query('INSERT INTO scratch VALUES (10, $1)', ['again']))
    t.equal(sqlState(primary), '23505')
    t.equal(violatedConstraint(primary), 'scratch_pkey')

    await insertAccount(db, { id: randomUUID(), ...systemOwner('first@example.com') })
    const unknownRole = await failure(
      t,
      insertAccount(db, { id: randomUUID(), ...systemOwner('nobody@example.com'), sub_role_code: 'clerk_missing' }),
    )
    t.equal(sqlState(unknownRole), '23503', 'a foreign key violation has its own state')
    await db.query("INSERT INTO sub_roles (code) VALUES ('clerk')")
    const sameEmail = await failure(t, insertAccount(db, { id: randomUUID(), ...systemOwner('FIRST@example.com'), sub_role_code: 'clerk' }))
    t.equal(sqlState(sameEmail), UNIQUE_VIOLATION)
    t.equal(violatedConstraint(sameEmail), 'admin_accounts_email_key', 'the case-insensitive e-mail index')
    const secondRoot = await failure(t, insertAccount(db, { id: randomUUID(), ...systemOwner('second@example.com') }))
    t.equal(sqlState(secondRoot), UNIQUE_VIOLATION)
    t.equal(violatedConstraint(secondRoot), 'admin_accounts_one_super_admin', 'the partial unique index is named')

    const check = await failure(t, db.query("INSERT INTO merchants (id) VALUES ('Global')"))
    t.equal(sqlState(check), '23514', 'a check violation')
    t.equal(violatedConstraint(check), 'merchants_id_check')
    t.equal(sqlState(new Error('plain')), undefined, 'errors without a state')
    t.equal(violatedConstraint({ code: '23505' }), undefined)
  })

  t.test('account writes tell a taken e-mail from a second super_admin', async (t) => {
    await t.rejects(
      db.transaction((tx) => writeAccount(tx, { ...systemOwner('First@Example.com'), sub_role_code: 'clerk' })),
      new ServiceError('EMAIL_TAKEN'),
    )
    await t.rejects(db.transaction((tx) => writeAccount(tx, systemOwner('third@example.com'))), new ServiceError('MERCHANT_EXISTS'))
    await db.query("INSERT INTO merchants (id) VALUES ('m-1')")
    const owner = { ...systemOwner('owner@m1.example'), principal_type: 'merchant' as const, merchant_id: 'm-1' }
    const { account } = await db.transaction((tx) => writeAccount(tx, owner))
    t.equal(account.merchant_id, 'm-1', 'a merchant has a super_admin of its own')
    await t.rejects(
      db.transaction((tx) => writeAccount(tx, { ...owner, email: 'other@m1.example' })),
      new ServiceError('MERCHANT_EXISTS'),
      'but only one',
    )
    const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM casbin_rule WHERE ptype = 'g'")
    t.equal(rows[0]?.n, 1, 'the refused writes left no role assignment')
  })
})
