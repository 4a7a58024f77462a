import { readFileSync } from 'node:fs'
import { newEnforcer, newModelFromString, type Enforcer, type Model } from 'casbin'
import fc from 'fast-check'
import t from 'tap'
import { PermissionEngine } from '../../src/engine/engine.js'
import { appendRow, hasRow, indexRows, indexRowsSoon, removeRows } from '../../src/engine/modelRows.js'
import { migrate } from '../../src/storage/migrate.js'
import { deleteRule, insertRule } from '../../src/storage/policyRows.js'
import { freshDatabase } from '../helper.js'

const modelText = readFileSync(new URL('../../model.conf', import.meta.url), 'utf8')
const catalog = [{ obj: 'orders', act: 'read', label: 'Read orders', group_name: 'Orders', is_active: true }]
const SEED = 20261124

function enforcerOf(engine: PermissionEngine): Enforcer {
  return (engine as unknown as { path: { enforcer: Enforcer } }).path.enforcer
}

function listOf(model: Model, ptype: 'p' | 'g'): string[][] {
  return model.model.get(ptype)?.get(ptype)?.policy ?? []
}

/** The rows Casbin itself holds, as text, sorted. */
function casbinRows(engine: PermissionEngine, ptype: 'p' | 'g'): string[] {
  return listOf(enforcerOf(engine).getModel(), ptype)
    .map((r) => r.join(','))
    .sort()
}

t.test('writes on the reference model keep Casbin, its role links and the index in step, without Casbin scans', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const engine = await PermissionEngine.load(db, modelText, { rootRoles: [], catalog })
  t.equal(engine.mode, 'index')
  const user = { id: 'u1', principal_type: 'merchant' as const, merchant_id: 'm1', sub_role_code: 'clerk' }

  await engine.addRule('p', ['clerk', 'm1', 'orders', 'read', 'allow'])
  await engine.addRule('p', ['clerk', 'm1', 'orders', 'read', 'allow'])
  t.same(casbinRows(engine, 'p'), ['clerk,m1,orders,read,allow'], 'a repeated add leaves one row')
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, 'no role link yet')

  await engine.addRule('g', ['u1', 'clerk', 'm1'])
  t.same(casbinRows(engine, 'g'), ['u1,clerk,m1'])
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), true, "Casbin's role manager has the new link")
  t.equal(engine.decide(user, 'm1', 'orders', 'read'), true, 'and so has the index')

  await engine.addRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, 'a deny row')
  await engine.removeRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
  await engine.removeRule('p', ['u1', 'm1', 'orders', 'read', 'deny'])
  t.same(casbinRows(engine, 'p'), ['clerk,m1,orders,read,allow'], 'removed once, a second removal is harmless')

  await engine.addRule('p', ['clerk', 'm1', 'orders', 'read', 'maybe'])
  await engine.addRule('p', ['clerk', 'm1', 'orders', 'read', 'maybe'])
  t.same(casbinRows(engine, 'p'), ['clerk,m1,orders,read,allow', 'clerk,m1,orders,read,maybe'], 'a row the index does not keep is added once too')
  await engine.removeRule('p', ['clerk', 'm1', 'orders', 'read', 'maybe'])
  t.same(casbinRows(engine, 'p'), ['clerk,m1,orders,read,allow'], 'and removed')

  await engine.removeRule('g', ['u1', 'clerk', 'm1'])
  t.same(casbinRows(engine, 'g'), [])
  t.equal(engine.enforce('u1', 'm1', 'orders', 'read'), false, 'the link is gone from the role manager')
  t.equal(engine.decide(user, 'm1', 'orders', 'read'), false, 'and from the index')
})

t.test('removeRows removes exactly the equal rows, duplicates included, wherever they are', async (t) => {
  const enforcer = await newEnforcer(newModelFromString(modelText))
  const model = enforcer.getModel()
  const rows = listOf(model, 'p')
  rows.push(
    ['a', 'm1', 'o', 'x', 'allow'],
    ['b', 'm1', 'o', 'x', 'allow'],
    ['a', 'm1', 'o', 'x', 'deny'],
    ['a', 'm1', 'o', 'x'],
    ['a', 'm1', 'o', 'x', 'allow'],
    ['c', 'm1', 'o', 'x', 'allow'],
  )
  t.equal(removeRows(model, 'p', ['a', 'm1', 'o', 'x', 'allow']), true)
  t.same(rows.map((r) => r.join(',')).sort(), ['a,m1,o,x', 'a,m1,o,x,deny', 'b,m1,o,x,allow', 'c,m1,o,x,allow'], 'a shorter row with the same start stays')
  t.equal(hasRow(model, 'p', ['a', 'm1', 'o', 'x', 'allow']), false)
  t.equal(hasRow(model, 'p', ['a', 'm1', 'o', 'x']), true)
  t.equal(removeRows(model, 'p', ['z', 'm1', 'o', 'x', 'allow']), false, 'nothing to remove')
  t.equal(removeRows(model, 'p', ['a', 'm1', 'o']), false, 'a prefix of a row is not the row')
  t.same(rows.map((r) => r.join(',')).sort(), ['a,m1,o,x', 'a,m1,o,x,deny', 'b,m1,o,x,allow', 'c,m1,o,x,allow'])
})

t.test("changes made through Casbin's own methods are noticed, not trusted blindly", async (t) => {
  const enforcer = await newEnforcer(newModelFromString(modelText))
  const model = enforcer.getModel()
  for (let i = 0; i < 40; i++) appendRow(model, 'p', [`s${i}`, 'm1', 'o', 'x', 'allow'])
  // Casbin's removePolicy replaces the list with a filtered copy; its addPolicy pushes onto it.
  t.equal(await enforcer.removePolicy('s3', 'm1', 'o', 'x', 'allow'), true)
  t.equal(hasRow(model, 'p', ['s3', 'm1', 'o', 'x', 'allow']), false)
  t.equal(removeRows(model, 'p', ['s7', 'm1', 'o', 'x', 'allow']), true)
  t.equal(await enforcer.addPolicy('s99', 'm1', 'o', 'x', 'allow'), true)
  t.equal(hasRow(model, 'p', ['s99', 'm1', 'o', 'x', 'allow']), true)
  t.equal(removeRows(model, 'p', ['s99', 'm1', 'o', 'x', 'allow']), true)
  t.equal(await enforcer.hasPolicy('s99', 'm1', 'o', 'x', 'allow'), false, 'Casbin sees the removal')
  t.equal((await enforcer.getPolicy()).length, 38)
})

/** One write on a rule list, or a change made behind modelRows' back. */
interface Op {
  kind: 'add' | 'remove' | 'duplicate' | 'casbin-remove'
  row: string[]
}

t.test('random adds and removals: the list, its table and Casbin agree with a plain multiset after every step', async (t) => {
  // Few values, so rows repeat, meet again after removal, and probe runs collide and wrap.
  const rowArb = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(fc.nat({ max: 60 }), fc.constantFrom('m1', 'm2', 'global'), fc.constantFrom('orders', 'payouts'), fc.constantFrom('allow', 'deny', 'maybe')).map(([s, d, o, e]) => [`s${s}`, d, o, 'read', e]) },
    { weight: 1, arbitrary: fc.tuple(fc.nat({ max: 60 }), fc.constantFrom('m1', 'global')).map(([s, d]) => [`s${s}`, d, 'orders', 'read']) },
  )
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 6, arbitrary: rowArb.map((row) => ({ kind: 'add' as const, row })) },
    { weight: 5, arbitrary: rowArb.map((row) => ({ kind: 'remove' as const, row })) },
    { weight: 1, arbitrary: rowArb.map((row) => ({ kind: 'duplicate' as const, row })) },
    { weight: 1, arbitrary: rowArb.map((row) => ({ kind: 'casbin-remove' as const, row })) },
  )
  const key = (row: readonly string[]) => row.join(',')
  let steps = 0
  await fc.assert(
    fc.asyncProperty(fc.array(rowArb, { maxLength: 120, size: 'max' }), fc.array(opArb, { minLength: 1, maxLength: 400, size: 'max' }), async (initial, ops) => {
      const enforcer = await newEnforcer(newModelFromString(modelText))
      const model = enforcer.getModel()
      const expected = new Map<string, number>()
      const count = (row: readonly string[]) => expected.get(key(row)) ?? 0
      const bump = (row: readonly string[], by: number) => {
        const n = count(row) + by
        if (n === 0) expected.delete(key(row))
        else expected.set(key(row), n)
      }
      // Rows as a load leaves them, duplicates included, before any table exists.
      for (const row of initial) {
        listOf(model, 'p').push([...row])
        bump(row, 1)
      }
      indexRows(model)
      for (const op of ops) {
        steps++
        if (op.kind === 'add') {
          if (!hasRow(model, 'p', op.row)) {
            appendRow(model, 'p', op.row)
            bump(op.row, 1)
          }
        } else if (op.kind === 'duplicate') {
          // What a row loaded twice looks like: appendRow is only ever asked for a new row.
          appendRow(model, 'p', op.row)
          bump(op.row, 1)
        } else if (op.kind === 'remove') {
          const had = count(op.row) > 0
          if (removeRows(model, 'p', op.row) !== had) throw new Error(`removeRows(${key(op.row)}) answered ${!had}`)
          bump(op.row, -count(op.row))
        } else {
          const had = count(op.row) > 0
          if ((await enforcer.removeNamedPolicy('p', ...op.row)) !== had) throw new Error(`Casbin's removal of ${key(op.row)} disagrees`)
          bump(op.row, -count(op.row))
        }
        const rows = listOf(model, 'p')
        const actual = new Map<string, number>()
        for (const row of rows) actual.set(key(row), (actual.get(key(row)) ?? 0) + 1)
        if (actual.size !== expected.size || [...expected].some(([k, n]) => actual.get(k) !== n)) throw new Error(`the list differs after ${op.kind} ${key(op.row)}`)
        if (hasRow(model, 'p', op.row) !== count(op.row) > 0) throw new Error(`hasRow(${key(op.row)}) is wrong after ${op.kind}`)
        if (enforcer.getModel().hasPolicy('p', 'p', op.row) !== count(op.row) > 0) throw new Error(`Casbin's hasPolicy(${key(op.row)}) is wrong`)
      }
      // Every row held is found, and so is every row of the value space that is not.
      for (const row of listOf(model, 'p')) if (!hasRow(model, 'p', row)) throw new Error(`held row ${key(row)} not found`)
      for (let s = 0; s <= 60; s++) {
        for (const row of [
          [`s${s}`, 'm1', 'orders', 'read', 'allow'],
          [`s${s}`, 'global', 'payouts', 'read', 'deny'],
          [`s${s}`, 'm1', 'orders', 'read'],
        ]) {
          if (hasRow(model, 'p', row) !== count(row) > 0) throw new Error(`hasRow(${key(row)}) is wrong at the end`)
        }
      }
    }),
    { seed: SEED, numRuns: 60 },
  )
  t.ok(steps > 1000, `${steps} steps checked`)
})

t.test('a list that grows to thousands of rows, shrinks to a few and grows again stays whole and findable', async (t) => {
  const enforcer = await newEnforcer(newModelFromString(modelText))
  const model = enforcer.getModel()
  const rows = listOf(model, 'p')
  let state = 7
  const random = (n: number) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return state % n
  }
  const rowOf = (i: number) => [`u${i}`, `m${i % 7}`, 'orders', 'read', i % 5 === 0 ? 'deny' : 'allow']
  const held = new Set<number>()
  const check = (when: string) => {
    t.equal(rows.length, held.size, `${when}: as many rows as held`)
    t.same(new Set(rows.map((r) => Number((r[0] as string).slice(1)))), held, `${when}: the rows held`)
    t.ok(
      [...held].every((i) => hasRow(model, 'p', rowOf(i))),
      `${when}: every held row is found`,
    )
    t.notOk(
      Array.from({ length: 12_000 }, (_, i) => i).some((i) => !held.has(i) && hasRow(model, 'p', rowOf(i))),
      `${when}: no other row is found`,
    )
  }
  for (let i = 0; i < 3000; i++) {
    rows.push(rowOf(i))
    held.add(i)
  }
  indexRows(model)
  for (let i = 3000; i < 9000; i++) {
    appendRow(model, 'p', rowOf(i))
    held.add(i)
  }
  check('grown past the size it was built for')
  const missed: number[] = []
  while (held.size > 40) {
    const i = Number((rows[random(rows.length)] as string[])[0]?.slice(1))
    if (!removeRows(model, 'p', rowOf(i))) missed.push(i)
    held.delete(i)
  }
  t.same(missed, [], 'every removal found its row, wherever it was')
  check('shrunk to a few rows')
  for (let i = 9000; i < 12_000; i++) {
    appendRow(model, 'p', rowOf(i))
    held.add(i)
  }
  check('grown again')
})

t.test('after random grants, revokes and role links, the engine holds and decides what a fresh load of the same rows does', async (t) => {
  const db = await freshDatabase(t)
  await migrate(db)
  const subjects = ['r0', 'r1', 'r2', 'u0', 'u1', 'u2', 'u3']
  const domains = ['global', 'm1', 'm2']
  const pairs = [
    ['orders', 'read'],
    ['orders', 'refund'],
    ['payouts', 'approve'],
  ] as const
  const wideCatalog = pairs.map(([obj, act]) => ({ obj, act, label: `${obj} ${act}`, group_name: obj, is_active: true }))
  const pRow = fc
    .tuple(fc.constantFrom(...subjects), fc.constantFrom(...domains), fc.constantFrom(...pairs), fc.constantFrom('allow', 'allow', 'deny', 'maybe'))
    .map(([s, d, [o, a], e]) => [s, d, o, a, e])
  const gRow = fc.tuple(fc.constantFrom(...subjects), fc.constantFrom('r0', 'r1', 'r2'), fc.constantFrom(...domains)).map(([m, r, d]) => [m, r, d])
  const opArb = fc.oneof(
    fc.record({ ptype: fc.constant('p' as const), row: pRow, add: fc.boolean() }),
    fc.record({ ptype: fc.constant('g' as const), row: gRow, add: fc.boolean() }),
  )
  let compared = 0
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 80, size: 'max' }), fc.array(opArb, { minLength: 10, maxLength: 80, size: 'max' }), async (seed, ops) => {
      await db.query('DELETE FROM casbin_rule')
      // Rows already stored when the engine loads, so removals hit rows anywhere in the loaded list.
      for (const op of seed) if (op.add) await insertRule(db, op.ptype, op.row)
      const engine = await PermissionEngine.load(db, modelText, { rootRoles: [], catalog: wideCatalog })
      for (const op of ops) {
        if (op.add) {
          await insertRule(db, op.ptype, op.row)
          await engine.addRule(op.ptype, op.row)
        } else {
          await deleteRule(db, op.ptype, op.row)
          await engine.removeRule(op.ptype, op.row)
        }
      }
      const fresh = await PermissionEngine.load(db, modelText, { rootRoles: [], catalog: wideCatalog })
      for (const ptype of ['p', 'g'] as const) {
        const held = casbinRows(engine, ptype)
        if (held.join('\n') !== casbinRows(fresh, ptype).join('\n')) throw new Error(`the ${ptype} rows differ from a fresh load`)
        for (const row of listOf(enforcerOf(fresh).getModel(), ptype)) {
          if (!enforcerOf(engine).getModel().hasPolicy(ptype, ptype, row)) throw new Error(`Casbin's hasPolicy misses ${row.join(',')}`)
          if (!hasRow(enforcerOf(engine).getModel(), ptype, row)) throw new Error(`the row table misses ${row.join(',')}`)
        }
      }
      for (const subject of subjects) {
        for (const domain of [...domains, 'm9']) {
          for (const [obj, act] of pairs) {
            const expected = fresh.enforce(subject, domain, obj, act)
            if (engine.enforce(subject, domain, obj, act) !== expected) throw new Error(`Casbin decides ${subject} ${domain} ${obj} ${act} differently`)
            if (engine.subRoleAllows(subject, domain, obj, act) !== expected) throw new Error(`the index decides ${subject} ${domain} ${obj} ${act} differently`)
            if (fresh.subRoleAllows(subject, domain, obj, act) !== expected) throw new Error(`the fresh index decides ${subject} ${domain} ${obj} ${act} differently`)
            compared++
          }
        }
      }
    }),
    { seed: SEED, numRuns: Number(process.env.DIFFERENTIAL_RUNS ?? 15) },
  )
  t.ok(compared > 0, `${compared} decisions compared`)
})

t.test('tables built in the background: a write before they are done finishes them first, and they end whole either way', async (t) => {
  const rowOf = (i: number) => [`u${i}`, `m${i % 7}`, 'orders', 'read', i % 5 === 0 ? 'deny' : 'allow']
  const modelWith = async (count: number) => {
    const model = (await newEnforcer(newModelFromString(modelText))).getModel()
    const rows = listOf(model, 'p')
    for (let i = 0; i < count; i++) rows.push(rowOf(i))
    return model
  }
  const settle = () => new Promise((resolve) => setTimeout(resolve, 50))
  const found = (model: Model, count: number) => Array.from({ length: count }, (_, i) => i).filter((i) => hasRow(model, 'p', rowOf(i))).length

  // Left alone: the slices (or, if they are not done yet, the first look-up) file every row.
  const alone = await modelWith(80_000)
  indexRowsSoon(alone, ['p'])
  await settle()
  t.equal(found(alone, 80_000), 80_000, 'every row is found')
  t.notOk(hasRow(alone, 'p', rowOf(80_000)), 'a row never added is not')

  // Written to at once: the write finishes the table, and the slices left find nothing more to do.
  const written = await modelWith(80_000)
  indexRowsSoon(written, ['p'])
  t.ok(hasRow(written, 'p', rowOf(79_999)), 'the last row is found before any slice ran')
  t.ok(removeRows(written, 'p', rowOf(5)), 'a removal finds its row')
  appendRow(written, 'p', rowOf(80_000))
  await settle()
  t.equal(listOf(written, 'p').length, 80_000, 'one row out, one in')
  t.equal(found(written, 80_001), 80_000, 'every row held is found, and none twice')
  t.notOk(hasRow(written, 'p', rowOf(5)), 'the removed row is gone')
  t.ok(removeRows(written, 'p', rowOf(80_000)), 'the row added is found')
  t.notOk(removeRows(written, 'p', rowOf(80_000)), 'and only once')

  // A small list is filed at once.
  const small = await modelWith(100)
  indexRowsSoon(small, ['p'])
  t.equal(found(small, 100), 100)
})
