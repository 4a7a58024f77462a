/**
 * The catalog sync plan as a plain function: from the stored catalog and
 * the declared one, the rows to insert and update, the events audited, and
 * the catalog memory holds afterwards.
 */
import t from 'tap'
import { planCatalogSync, type CatalogSyncPlan } from '../../src/domain/catalogSync.js'
import { declaredCatalog, scopeOf, type CatalogEntry, type PermissionDeclaration } from '../../src/domain/permissions.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('pure domain rules')

const declared = (obj: string, act: string, label = `${obj} ${act}`, group = 'G'): PermissionDeclaration => ({ obj, act, label, group })
const stored = (obj: string, act: string, is_active = true, label = `${obj} ${act}`, group_name = 'G'): CatalogEntry => ({ obj, act, label, group_name, is_active, scope: 'any' })

/** A plan in short: each list as `obj:act`, events as `event obj:act`. */
function summary(plan: CatalogSyncPlan): Record<string, string[]> {
  const name = (e: CatalogEntry) => `${e.obj}:${e.act}${e.is_active ? '' : ' (inactive)'}`
  return {
    next: plan.next.map(name),
    events: plan.events.map(({ event, entry }) => `${event} ${entry.obj}:${entry.act}`),
    inserted: plan.inserted.map(name),
    updated: plan.updated.map(name),
  }
}

t.test('planCatalogSync', async (t) => {
  const cases: Array<[string, CatalogEntry[], PermissionDeclaration[], Record<string, string[]>]> = [
    ['an empty store: every pair added', [], [declared('orders', 'read'), declared('orders', 'refund')], {
      next: ['orders:read', 'orders:refund'],
      events: ['catalog_added orders:read', 'catalog_added orders:refund'],
      inserted: ['orders:read', 'orders:refund'],
      updated: [],
    }],
    ['in line already: nothing written', [stored('orders', 'read')], [declared('orders', 'read')], {
      next: ['orders:read'],
      events: [],
      inserted: [],
      updated: [],
    }],
    ['a label changed: updated without an event', [stored('orders', 'read', true, 'Old label')], [declared('orders', 'read')], {
      next: ['orders:read'],
      events: [],
      inserted: [],
      updated: ['orders:read'],
    }],
    ['a group changed: updated without an event', [stored('orders', 'read', true, 'orders read', 'Old')], [declared('orders', 'read')], {
      next: ['orders:read'],
      events: [],
      inserted: [],
      updated: ['orders:read'],
    }],
    ['a pair no longer declared: deactivated, kept after the declared ones', [stored('orders', 'cancel'), stored('orders', 'read')], [declared('orders', 'read')], {
      next: ['orders:read', 'orders:cancel (inactive)'],
      events: ['catalog_deactivated orders:cancel'],
      inserted: [],
      updated: ['orders:cancel (inactive)'],
    }],
    ['an inactive pair still not declared: nothing', [stored('orders', 'cancel', false)], [], {
      next: ['orders:cancel (inactive)'],
      events: [],
      inserted: [],
      updated: [],
    }],
    ['an inactive pair declared again: reactivated', [stored('orders', 'cancel', false)], [declared('orders', 'cancel')], {
      next: ['orders:cancel'],
      events: ['catalog_reactivated orders:cancel'],
      inserted: [],
      updated: ['orders:cancel'],
    }],
    ['all at once, in declared order then stored order', [stored('a', 'x', false), stored('b', 'y'), stored('c', 'z')], [declared('d', 'w'), declared('a', 'x'), declared('c', 'z')], {
      next: ['d:w', 'a:x', 'c:z', 'b:y (inactive)'],
      events: ['catalog_added d:w', 'catalog_reactivated a:x', 'catalog_deactivated b:y'],
      inserted: ['d:w'],
      updated: ['a:x', 'b:y (inactive)'],
    }],
  ]
  for (const [name, before, code, expected] of cases) t.strictSame(summary(planCatalogSync(before, code)), expected, name)
})

t.test('planCatalogSync: entries take the declared label and group', async (t) => {
  const plan = planCatalogSync([stored('orders', 'read', false, 'Old', 'Old')], [declared('orders', 'read', 'View orders', 'Orders')])
  const expected: CatalogEntry = { obj: 'orders', act: 'read', label: 'View orders', group_name: 'Orders', is_active: true, scope: 'any' }
  t.strictSame(plan.next, [expected])
  t.strictSame(plan.updated, [expected])
  t.strictSame(plan.events, [{ event: 'catalog_reactivated', entry: expected }])
})

t.test('planCatalogSync: a synced catalog plans nothing the second time', async (t) => {
  const first = planCatalogSync([stored('a', 'x', false), stored('b', 'y', true, 'Old')], [declared('a', 'x'), declared('b', 'y'), declared('c', 'z')])
  const second = planCatalogSync(first.next, [declared('a', 'x'), declared('b', 'y'), declared('c', 'z')])
  t.strictSame(summary(second), { next: ['a:x', 'b:y', 'c:z'], events: [], inserted: [], updated: [] })
})

t.test('planCatalogSync: entries take the declared scope, `any` unless declared otherwise', async (t) => {
  const plan = planCatalogSync([stored('merchant', 'onboard')], [{ ...declared('merchant', 'onboard'), scope: 'platform' }, declared('orders', 'read')])
  t.strictSame(
    plan.next.map((e) => `${e.obj}:${e.act} ${e.scope}`),
    ['merchant:onboard platform', 'orders:read any'],
  )
  t.strictSame(plan.updated, [], 'the scope is not stored: it changes no row')
})

t.test('scopeOf: the code declares which pairs only system-owner users can use', async (t) => {
  const platform = declaredCatalog().filter((p) => scopeOf(p) === 'platform').map((p) => `${p.obj}:${p.act}`)
  t.strictSame(platform, ['merchant:onboard'])
  t.equal(scopeOf({ obj: 'gone', act: 'away' }), 'any', 'a pair the code no longer declares')
})
