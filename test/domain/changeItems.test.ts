import t from 'tap'
import { SYSTEM_ACTOR, denyEntry, grantEntry, revokeEntry, roleChangedEntry, roleHolder, userHolder } from '../../src/domain/audit.js'
import { ruleAdded, ruleRemoved } from '../../src/domain/changes.js'
import { changeItemsOf } from '../../src/domain/changeItems.js'

const USER = { id: '00000000-0000-4000-8000-000000000001', merchant_id: 'shop-a', principal_type: 'merchant' as const }

t.test("a write's items take the effect, expiry and sub-role from its own changes", async (t) => {
  const expires = new Date('2030-01-01T00:00:00.000Z')
  const audit = [
    grantEntry(roleHolder('clerk'), { obj: 'orders', act: 'read', domain: 'global' }, SYSTEM_ACTOR),
    denyEntry(userHolder(USER), { obj: 'orders', act: 'refund', domain: 'shop-a' }, SYSTEM_ACTOR),
    revokeEntry(roleHolder('clerk'), { obj: 'reports', act: 'read', domain: 'global' }, SYSTEM_ACTOR),
    roleChangedEntry(USER, SYSTEM_ACTOR),
  ]
  const changes = [
    ruleRemoved('p', ['clerk', 'global', 'reports', 'read', 'allow']),
    ruleAdded('p', [USER.id, 'shop-a', 'orders', 'refund', 'deny'], expires),
    ruleAdded('p', ['clerk', 'global', 'orders', 'read', 'allow']),
    ruleAdded('g', [USER.id, 'cashier', 'shop-a']),
    // A later row with the same key is not the one the entry records: the first wins.
    ruleAdded('g', [USER.id, 'other', 'shop-a']),
  ]
  const items = changeItemsOf(audit, changes)
  t.same(
    items.map((i) => [i.kind, i.sub_role ?? i.user_id, i.obj, i.act, i.effect, i.expires_at]),
    [
      ['role_grant', 'clerk', 'orders', 'read', 'allow', undefined],
      ['user_deny', USER.id, 'orders', 'refund', 'deny', expires.toISOString()],
      ['role_revoke', 'clerk', 'reports', 'read', 'allow', undefined],
      ['assignment', 'cashier', undefined, undefined, undefined, undefined],
    ],
  )
  t.equal(items[3]?.user_id, USER.id)
  // A revoke reads the removed row, a grant the added one: the same key under the other operation is not taken.
  const onlyAdded = changeItemsOf([revokeEntry(roleHolder('clerk'), { obj: 'orders', act: 'read', domain: 'global' }, SYSTEM_ACTOR)], [ruleAdded('p', ['clerk', 'global', 'orders', 'read', 'allow'])])
  t.equal(onlyAdded[0]?.effect, undefined, 'no removed row: no effect')
})

// An import is one write of up to millions of entries: each entry finds its row by key. Read by a
// scan per entry, this case is 4·10^10 comparisons and runs into the file's timeout.
t.test('a write of 200,000 entries is read once, not once per entry', async (t) => {
  const count = 200_000
  const audit = []
  const changes = []
  for (let i = 0; i < count; i++) {
    audit.push(grantEntry(roleHolder(`r${i}`), { obj: 'orders', act: 'read', domain: 'global' }, SYSTEM_ACTOR))
    changes.push(ruleAdded('p', [`r${i}`, 'global', 'orders', 'read', 'allow']))
  }
  const items = changeItemsOf(audit, changes)
  t.equal(items.length, count)
  t.equal(items.filter((i) => i.effect === 'allow').length, count, 'every entry found its row')
  t.equal(items[count - 1]?.sub_role, `r${count - 1}`)
})
