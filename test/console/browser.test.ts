import t from 'tap'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { BrowserContext, Page } from 'playwright-core'
import { chromium } from 'playwright-core'
import { TEST_SECRET, tempDir } from '../helper.js'
import { cliFor } from '../support/cli.js'
import { decodePayload, nowSeconds, sign } from '../support/jwt.js'
import { processDatabase, repositoryRoot, startServer } from '../support/serverProcess.js'
import { decisionEvent } from '../support/decisionEvents.js'
import type { Account } from '../../src/domain/principals.js'
import { insertDecisionEvents } from '../../src/storage/decisionEvents.js'
import { openPGlite } from '../../src/storage/pglite.js'

// Runs on both back ends: the console's screens read what the storage answers (names in the audit trail, lists, filters).

/**
 * The admin console in headless Chromium against a running service: each
 * screen driven as an admin would, the API's state read after each action.
 * `UPDATE_CONSOLE_SCREENSHOTS=1` writes the screenshots of docs/getting-started.md to docs/console/.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const STEP_MS = 15_000

const skip = existsSync(CHROMIUM) ? false : `no Chromium at ${CHROMIUM}: .ci/run installs the Debian package (CHROMIUM_PATH names another)`

t.test('the console drives the API', { skip, timeout: 170_000 }, async (t) => {
  const db = await processDatabase(t)
  const ROOT_EMAIL = 'admin@example.com'
  const ROOT_PASSWORD = 'root-chosen-pass-1'
  // PGlite: the first start makes admin@example.com with a generated password. PostgreSQL creates nothing
  // implicitly (CONTRACT 8): the account is bootstrapped, then `password reset` prints a generated one, as an operator would.
  const bootstrap = db.kind === 'postgres' ? { BOOTSTRAP_ADMIN_EMAIL: ROOT_EMAIL, BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap-pass-123' } : {}
  const server = await startServer(t, {
    env: { DATABASE_URL: db.url, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'warn', ...bootstrap },
    name: 'console server',
  })
  let generated: string
  if (db.kind === 'postgres') {
    const reset = await cliFor({ DATABASE_URL: db.url, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' })('password', 'reset', '--email', ROOT_EMAIL)
    generated = /new password for .*: (\S+)$/.exec(reset.out.split('\n')[0] ?? '')?.[1] ?? ''
  } else {
    const notice = await server.waitForLog((line) => /^FIRST START: the system-owner super_admin admin@example\.com was created with password /.test(line.text ?? ''))
    generated = notice.text?.split(' ').pop() ?? ''
  }
  const shots = process.env.UPDATE_CONSOLE_SCREENSHOTS === '1' ? join(repositoryRoot, 'docs', 'console') : tempDir(t, 'aps-shots-')
  mkdirSync(shots, { recursive: true })

  // The API as a test client sees it, to check what each action left behind.
  const apiCall = async (method: string, path: string, token: string | null, body?: unknown) => {
    const response = await fetch(`${server.base}${path}`, {
      method,
      headers: { ...(token !== null ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    return { status: response.status, json: (await response.json()) as { data: Record<string, unknown> & { items: Array<Record<string, unknown>> } } }
  }
  const login = async (email: string, password: string) => (await apiCall('POST', '/v2/auth/login', null, { command: 'login', data: { email, password } })).json.data.access_token as string
  let rootToken = ''
  const get = async (path: string, token = rootToken) => (await apiCall('GET', path, token)).json.data

  const context: BrowserContext = await chromium.launchPersistentContext(tempDir(t, 'aps-chromium-'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1100, height: 720 },
    locale: 'en-US',
    // Not UTC, so that a time shown in UTC by mistake shows.
    timezoneId: 'Europe/Madrid',
  })
  t.teardown(() => context.close())
  context.setDefaultTimeout(STEP_MS)
  const page: Page = context.pages()[0] ?? (await context.newPage())
  const requests: string[] = []
  page.on('request', (request) => requests.push(request.url()))
  const failures: string[] = []
  page.on('pageerror', (error) => failures.push(error.message))
  page.on('console', (message) => {
    // The browser reports CSP refusals on the console: none may happen.
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) failures.push(message.text())
  })

  const signIn = async (email: string, password: string) => {
    await page.goto(`${server.base}/console/`)
    await page.getByLabel('E-mail').fill(email)
    await page.getByLabel('Password').fill(password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('button', { name: 'Sign out' }).waitFor()
  }
  const open = async (section: string) => {
    await page.getByRole('navigation').getByRole('link', { name: section }).click()
    await page.getByRole('heading', { level: 2, name: section }).waitFor()
  }
  const status = (text: string | RegExp) => page.getByRole('status').filter({ hasText: text }).waitFor()

  await t.test('the first sign-in with a generated password asks for a new one before anything else', async (t) => {
    await signIn(ROOT_EMAIL, generated)
    await status('This account signed in with a generated password. Choose your own before you go on.')
    t.equal(await page.getByRole('navigation').count(), 0, 'no section is reachable')
    await page.goto(`${server.base}/console/#/accounts`)
    await status('This account signed in with a generated password.')
    t.equal(await page.getByRole('heading', { level: 2, name: 'Accounts' }).count(), 0, 'not even by its address')
    await page.getByLabel('Current password').fill(generated)
    await page.getByLabel('New password').fill(ROOT_PASSWORD)
    await page.getByRole('button', { name: 'Change password' }).click()
    await page.getByRole('heading', { level: 2, name: 'Accounts' }).waitFor()
    rootToken = await login(ROOT_EMAIL, ROOT_PASSWORD)
    t.equal((await get('/v2/profile')).must_change_password, false, 'the API no longer marks it')
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
  })

  await t.test('sign in; the token stays in sessionStorage', async (t) => {
    const index = await fetch(`${server.base}/console/`)
    t.match(index.headers.get('content-security-policy'), /script-src 'self'(;|$)/, 'CSP: scripts from this origin only')
    t.notMatch(index.headers.get('content-security-policy'), /unsafe-inline/)
    const icon = await page.request.get(`${server.base}/console/favicon.svg`)
    t.match({ status: icon.status(), type: icon.headers()['content-type'] }, { status: 200, type: 'image/svg+xml' }, 'the favicon the page names is served (no 404 for /favicon.ico)')
    await signIn(ROOT_EMAIL, ROOT_PASSWORD)
    t.ok(await page.getByRole('heading', { level: 2, name: 'Accounts' }).isVisible(), 'the accounts screen opens')
    const stored = await page.evaluate(() => ({ session: Object.keys(sessionStorage), local: Object.keys(localStorage), cookie: document.cookie }))
    t.same(stored.local, [], 'nothing in localStorage')
    t.equal(stored.cookie, '', 'no cookie')
    t.ok(stored.session.includes('aps.console.token'), 'the token is in sessionStorage')
  })

  await t.test('merchants: onboard two, one with a name; the list shows names, searches them, and a row opens its accounts', async (t) => {
    await open('Merchants')
    for (const [id, displayName] of [
      ['shop-a', 'Shop A Books'],
      ['shop-b', ''],
    ] as const) {
      await page.getByLabel('Merchant id').fill(id)
      await page.getByLabel('Merchant name (optional: the id when empty)').fill(displayName)
      await page.getByLabel('E-mail').fill(`owner@${id}.example`)
      await page.getByLabel('Name', { exact: true }).fill(`Owner ${id}`)
      await page.getByLabel('Password').fill('owner-pass-123')
      await page.getByRole('button', { name: 'Onboard a merchant' }).click()
      await status(`Onboarded ${id}.`)
    }
    await page.getByRole('link', { name: 'shop-b', exact: true }).waitFor()
    const merchants = await get('/v2/admin/merchants')
    t.same(merchants.items.map((m) => [m.merchant_id, m.display_name]), [['shop-a', 'Shop A Books'], ['shop-b', 'shop-b']], 'the API lists both, shop-b named by its id')
    t.ok(await page.locator('tr[data-merchant="shop-a"]').getByRole('link', { name: 'Shop A Books' }).isVisible(), 'the list shows the name')
    await page.screenshot({ path: join(shots, 'merchants.png') })

    // A search in flight says so; one that finds nothing says that.
    let release = (): void => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    await page.route('**/v2/admin/merchants?*', async (route) => {
      await held
      await route.continue()
    })
    await page.getByLabel('Id starts with, or name contains').fill('BOOKS')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('status').filter({ hasText: 'Loading…' }).waitFor()
    t.pass('a list in flight shows "Loading…"')
    release()
    await page.getByRole('link', { name: 'shop-b', exact: true }).waitFor({ state: 'detached' })
    await page.unroute('**/v2/admin/merchants?*')
    t.equal(await page.getByRole('status').filter({ hasText: 'Loading…' }).count(), 0, 'and no longer once answered')
    t.ok(await page.getByRole('link', { name: 'Shop A Books' }).isVisible(), 'the name is searched, ignoring case')
    await page.getByLabel('Id starts with, or name contains').fill('nothing-here')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('status').filter({ hasText: 'No merchant matches this search.' }).waitFor()
    t.equal(await page.locator('table').count(), 0, 'an empty list is a sentence, not a bare header')

    await page.getByLabel('Id starts with, or name contains').fill('shop')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('link', { name: 'Shop A Books' }).click()
    await page.getByRole('heading', { level: 2, name: 'Accounts' }).waitFor()
    t.equal(new URL(page.url()).hash, '#/accounts/shop-a', "the row opens the merchant's accounts")
    await page.getByRole('link', { name: 'owner@shop-a.example' }).waitFor()
    t.equal(await page.getByRole('link', { name: 'owner@shop-b.example' }).count(), 0, 'of that merchant only')
    t.equal(await page.getByLabel('Merchant', { exact: true }).first().inputValue(), 'shop-a', 'the merchant filter says which')
    t.ok(await page.getByLabel('Merchant', { exact: true }).first().getByRole('option', { name: 'Shop A Books (shop-a)' }).count(), 'pickers name merchants by their names')
  })

  await t.test('shadow model: the screen says why nothing is compared', async (t) => {
    await open('Shadow model')
    await page.getByText('No decision is compared: no shadow model is configured (SHADOW_MODEL_PATH)').waitFor()
    t.ok(await page.getByText('No disagreement so far.').isVisible(), 'and that there is no disagreement')
    t.match(await get('/v2/admin/model/shadow'), { enabled: false, compared: 0 }, 'the API agrees')
  })

  await t.test('sub-roles: created only by their own confirmed action, in the domain it names', async (t) => {
    await open('Sub-roles')
    await page.getByRole('heading', { name: 'Create a sub-role in global (the platform)' }).waitFor()
    for (const [code, label] of [
      ['clerk', 'Shop clerk'],
      ['packer', 'Packer'],
    ] as const) {
      await page.getByLabel('Code').fill(code)
      await page.getByLabel('Label').fill(label)
      await page.getByRole('button', { name: 'Create a sub-role' }).click()
      const question = page.getByRole('alertdialog', { name: `Create the sub-role ${code} (${label}) in global (the platform)?` })
      await question.waitFor()
      t.notOk((await get('/v2/admin/sub-roles')).items.some((r) => r.code === code), `nothing is created before ${code} is confirmed`)
      await question.getByRole('button', { name: 'Confirm' }).click()
      await status(`Created ${code} in global (the platform).`)
    }
    await page.getByRole('cell', { name: 'Shop clerk' }).waitFor()
    const roles = await get('/v2/admin/sub-roles')
    t.match(roles.items.find((r) => r.code === 'clerk'), { label: 'Shop clerk', members: 0 }, 'the API lists it with its label')
  })

  let clerkId = ''
  await t.test('accounts: register, change sub-role, deactivate, reactivate', async (t) => {
    await open('Accounts')
    for (const email of ['clerk1@shop-a.example', 'clerk2@shop-a.example']) {
      await page.getByLabel('E-mail', { exact: true }).fill(email)
      await page.getByLabel('Name', { exact: true }).fill(email.split('@')[0] ?? email)
      await page.getByLabel('Password', { exact: true }).fill('clerk-pass-123')
      await page.getByLabel('Merchant', { exact: true }).last().selectOption('shop-a')
      const subRole = page.getByLabel('Sub-role', { exact: true }).last()
      await subRole.locator('option[value="clerk"]').waitFor({ state: 'attached' })
      if (email.startsWith('clerk1')) {
        // A picker of what exists in shop-a: no typo can name (and so create) another sub-role.
        const offered = await subRole.locator('option').evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value).filter((v) => v !== ''))
        const known = (await get('/v2/admin/sub-roles?domain=shop-a')).items.filter((r) => r.is_root !== true).map((r) => r.code)
        t.same(offered.sort(), known.sort(), "the sub-role field offers shop-a's sub-roles, and only them")
        t.equal(await subRole.evaluate((el) => el.tagName), 'SELECT', 'it is a picker, not free text')
        t.ok(await subRole.getByRole('option', { name: 'Shop clerk (clerk)' }).count(), 'with their labels')
      }
      await subRole.selectOption('clerk')
      await page.getByRole('button', { name: 'Register an administrator' }).click()
      await status(`Registered ${email}.`)
    }
    const listed = await get('/v2/admin/accounts?merchant_id=shop-a&sub_role_code=clerk')
    t.equal(listed.total, 2, 'the API has both clerks')
    clerkId = String(listed.items.find((a) => a.email === 'clerk1@shop-a.example')?.id)
    const clerk2 = String(listed.items.find((a) => a.email === 'clerk2@shop-a.example')?.id)

    await page.getByRole('button', { name: 'Change sub-role: clerk2@shop-a.example' }).waitFor()
    t.equal(await page.getByRole('link', { name: 'owner@shop-a.example' }).count(), 1, "shop-a's owner is listed")
    t.equal(await page.getByRole('button', { name: 'Change sub-role: owner@shop-a.example' }).count(), 0, 'a root account (is_root) offers no sub-role change')
    await page.getByRole('button', { name: 'Change sub-role: clerk2@shop-a.example' }).click()
    const change = page.getByRole('form', { name: 'New sub-role for clerk2@shop-a.example' })
    await change.getByLabel('Sub-role').locator('option[value="packer"]').waitFor({ state: 'attached' })
    t.equal(await change.getByLabel('Sub-role').evaluate((el) => el.tagName), 'SELECT', 'the new sub-role is picked, not typed')
    await change.getByLabel('Sub-role').selectOption('packer')
    await change.getByRole('button', { name: 'Apply' }).click()
    await change.getByRole('alertdialog', { name: 'Move clerk2@shop-a.example from clerk to packer? They lose at once whatever clerk holds and packer does not.' }).getByRole('button', { name: 'Confirm' }).click()
    await status('Saved.')
    t.equal((await get(`/v2/admin/accounts/${clerk2}`)).sub_role_code, 'packer', 'the API moved clerk2')

    await page.getByRole('button', { name: 'Deactivate: clerk2@shop-a.example' }).click()
    const question = page.getByRole('alertdialog', { name: 'Deactivate clerk2@shop-a.example? Their sessions end now and they can no longer sign in.' })
    await question.waitFor()
    await page.keyboard.press('Escape')
    await question.waitFor({ state: 'detached' })
    t.equal((await get(`/v2/admin/accounts/${clerk2}`)).status, 'active', 'Escape cancels: nothing was sent')
    await page.getByRole('button', { name: 'Deactivate: clerk2@shop-a.example' }).click()
    // The request is held until the buttons have been looked at: none may be pressed twice meanwhile.
    let release = (): void => {}
    const held = new Promise<void>((resolve) => (release = resolve))
    await page.route('**/deactivate', async (route) => {
      await held
      await route.continue()
    })
    await question.getByRole('button', { name: 'Confirm' }).click()
    t.ok(await question.getByRole('button', { name: 'Confirm' }).isDisabled(), 'Confirm is disabled while the request is in flight')
    t.ok(await question.getByRole('button', { name: 'Cancel' }).isDisabled(), 'and Cancel')
    release()
    await page.getByRole('button', { name: 'Reactivate: clerk2@shop-a.example' }).waitFor()
    await page.unroute('**/deactivate')
    t.equal((await get(`/v2/admin/accounts/${clerk2}`)).status, 'deactivated', 'the API switched it off')
    await page.getByRole('button', { name: 'Reactivate: clerk2@shop-a.example' }).click()
    await page.getByRole('button', { name: 'Deactivate: clerk2@shop-a.example' }).waitFor()
    t.equal((await get(`/v2/admin/accounts/${clerk2}`)).status, 'active', 'and on again')

    // Each row offers exactly what the API says the signed-in admin may do to it (allowed_actions); the admin's own row never offers switching itself off.
    const rows = (await get('/v2/admin/accounts?page_size=100')).items as Array<{ email: string; allowed_actions: string[] }>
    const buttons: Record<string, string> = { 'change-sub-role': 'Change sub-role', deactivate: 'Deactivate', reactivate: 'Reactivate' }
    for (const row of rows) {
      const offered = []
      for (const [action, label] of Object.entries(buttons)) if ((await page.getByRole('button', { name: `${label}: ${row.email}`, exact: true }).count()) > 0) offered.push(action)
      const expected = row.email === ROOT_EMAIL ? row.allowed_actions.filter((a) => a !== 'deactivate') : row.allowed_actions
      t.same(offered, expected, `${row.email}: the console offers what the API allows`)
    }
    t.same(rows.find((r) => r.email === ROOT_EMAIL)?.allowed_actions, [], 'the last system-owner root may not be switched off, nor moved')
    t.same(rows.find((r) => r.email === 'owner@shop-a.example')?.allowed_actions, ['deactivate'], 'a root account is not moved to another sub-role')
    await page.getByLabel('Search (e-mail or name)').fill('clerk1')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.getByText('Page 1 of 1 (1 in all)').waitFor()
    t.equal(await page.getByRole('link', { name: 'clerk2@shop-a.example' }).count(), 0, 'the filter applies')
    await page.screenshot({ path: join(shots, 'accounts.png') })
    await page.getByLabel('Search (e-mail or name)').fill('nobody-here')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('status').filter({ hasText: 'No account matches these filters.' }).waitFor()
    t.equal(await page.locator('table').count(), 0, 'an empty list says so in words, not with a bare header')
  })

  await t.test('permission matrix: a batch of grants, a deny and a revoke, previewed once, saved in one call, by keyboard', async (t) => {
    await open('Sub-roles')
    await page.getByRole('button', { name: 'Permissions: clerk' }).click()
    await page.getByRole('heading', { name: 'Permissions of clerk in global (the platform)' }).waitFor()
    t.equal(await page.getByLabel(/Onboard merchants/).count(), 1, 'in global the matrix offers the platform pair')
    // A grant made in global (a platform template) reaches shop-a, where it cannot be taken back.
    t.equal((await apiCall('POST', '/v2/admin/permissions/roles/clerk/grant', rootToken, { command: 'grant-role-permission', data: { obj: 'customers', act: 'read' } })).status, 200)
    await page.getByLabel('Domain').selectOption('shop-a')
    await page.getByRole('button', { name: 'Permissions: clerk' }).click()
    await page.getByRole('heading', { name: 'Permissions of clerk in shop-a' }).waitFor()
    const cell = (label: string) => page.getByRole('radiogroup', { name: label })
    await cell('Refund orders orders:refund').waitFor()
    const customers = cell('View customers customers:read')
    t.ok(await customers.getByRole('radio', { name: 'Allow' }).isChecked(), 'the global grant shows in shop-a')
    t.ok(await customers.getByRole('radio', { name: 'None' }).isDisabled(), 'but is not offered to be taken back there')
    t.ok(await customers.getByRole('radio', { name: 'Deny' }).isEnabled(), 'a deny in shop-a still is')
    t.ok(await customers.getByText('Granted in global (the platform): taken back there, not here.').isVisible(), 'and the cell says why')
    t.equal(await page.getByLabel(/Onboard merchants/).count(), 0, 'in a merchant it does not (the API refuses it there)')
    const bulk: string[] = []
    const onBulk = (request: { url(): string; postData(): string | null }) => {
      if (new URL(request.url()).pathname === '/v2/admin/permissions/changes') bulk.push(request.postData() ?? '')
    }
    page.on('request', onBulk)

    // Space marks a cell: the focus stays on it and no other cell is disabled.
    const refundAllow = cell('Refund orders orders:refund').getByRole('radio', { name: 'Allow' })
    await refundAllow.focus()
    await page.keyboard.press('Space')
    await page.getByRole('region', { name: '1 change waiting' }).waitFor()
    t.ok(await refundAllow.isChecked(), 'Space marked the cell')
    t.ok(await refundAllow.evaluate((el) => el === document.activeElement), 'the focus stays on the cell')
    t.ok((await page.locator('.matrix input[type=radio]:not([disabled])').count()) > 10, 'the other cells stay usable')
    await page.keyboard.press('Escape')
    await page.getByRole('region', { name: '1 change waiting' }).waitFor({ state: 'detached' })
    t.ok(await cell('Refund orders orders:refund').getByRole('radio', { name: 'None' }).isChecked(), 'Escape drops the batch: the cell is back as it was')
    t.equal(await page.evaluate(() => document.activeElement?.getAttribute('name')), 'cell-orders-refund', 'and the focus is back on that cell, not the page')

    // A batch: two grants by keyboard and by mouse, and a deny.
    await refundAllow.focus()
    await page.keyboard.press('Space')
    await cell('View products products:read').getByRole('radio', { name: 'Allow' }).check()
    await cell('View reports reports:read').getByRole('radio', { name: 'Deny' }).check()
    const pending = page.getByRole('region', { name: '3 changes waiting' })
    await pending.waitFor()
    t.ok(await pending.getByText('Deny View reports (reports:read)').isVisible(), 'the batch in words')
    // Tab goes on from the cells to the batch's buttons.
    await cell('View reports reports:read').getByRole('radio', { name: 'Deny' }).focus()
    let reached = false
    for (let i = 0; i < 40 && !reached; i++) {
      await page.keyboard.press('Tab')
      reached = await pending.getByRole('button', { name: 'Preview' }).evaluate((el) => el === document.activeElement)
    }
    t.ok(reached, 'Tab reaches Preview')
    t.same(bulk, [], 'nothing asked of the API while cells are marked')
    await page.keyboard.press('Enter')
    await pending.getByText('1 user gains access. 0 users lose access.').waitFor()
    t.ok(await pending.getByText('clerk1@shop-a.example gains Refund orders (orders:refund) and View products (products:read).').isVisible(), 'who gains what, in words')
    t.equal(bulk.length, 1, 'one preview for the whole batch')
    t.match(JSON.parse(bulk[0] ?? '{}'), {
      command: 'apply-permission-changes',
      data: {
        dry_run: true,
        changes: [
          { kind: 'role_grant', sub_role: 'clerk', obj: 'orders', act: 'refund', domain: 'shop-a' },
          { kind: 'role_grant', sub_role: 'clerk', obj: 'products', act: 'read', domain: 'shop-a' },
          { kind: 'role_deny', sub_role: 'clerk', obj: 'reports', act: 'read', domain: 'shop-a' },
        ],
      },
    }, 'through the bulk endpoint, as a dry run')
    type RolePair = { obj: string; act: string; domain: string }
    const inShopA = (pairs: unknown) => (pairs as RolePair[]).filter((p) => p.domain === 'shop-a')
    const before = await get('/v2/admin/permissions/roles/clerk?domain=shop-a')
    t.same([inShopA(before.permissions), before.denied], [[], []], 'the dry run wrote nothing')
    await page.screenshot({ path: join(shots, 'permission-matrix.png') })
    await pending.getByRole('button', { name: 'Save' }).click()
    // A deny takes access away (now or from whoever gets the sub-role): asked first.
    const question = page.getByRole('alertdialog', { name: "Save 3 changes to clerk in shop-a? 0 users lose access. A sub-role's deny cannot be taken back here." })
    await question.getByRole('button', { name: 'Confirm' }).click()
    await status('Saved 3 changes.')
    t.equal(bulk.length, 2, 'saved in one more call')
    t.notOk('dry_run' in (JSON.parse(bulk[1] ?? '{}') as { data: Record<string, unknown> }).data, 'the same list, without dry_run')
    const after = await get('/v2/admin/permissions/roles/clerk?domain=shop-a')
    t.match(inShopA(after.permissions), [{ obj: 'orders', act: 'refund', domain: 'shop-a' }, { obj: 'products', act: 'read', domain: 'shop-a' }], 'the API has the grants')
    t.match(after.denied, [{ obj: 'reports', act: 'read', domain: 'shop-a' }], 'and the deny')
    t.ok(await refundAllow.isChecked(), 'the matrix shows the grant')
    const reports = cell('View reports reports:read')
    t.ok(await reports.getByRole('radio', { name: 'Deny' }).isChecked(), 'and the deny')
    // The matrix reads the sub-role again after the save, and only then shows its deny as fixed: wait for that reading.
    const deniedNote = reports.getByText("Denied: no change here lifts a sub-role's deny (a policy import does).")
    await deniedNote.waitFor()
    t.ok(await reports.getByRole('radio', { name: 'None' }).isDisabled(), 'which no change here lifts')
    t.ok(await deniedNote.isVisible(), 'and says so')

    // A revoke: who loses what, asked first with the consequence; Escape answers the question and keeps the batch.
    await cell('View products products:read').getByRole('radio', { name: 'None' }).check()
    const revoke = page.getByRole('region', { name: '1 change waiting' })
    await revoke.getByText('Take back View products (products:read)').waitFor()
    await revoke.getByRole('button', { name: 'Preview' }).click()
    await revoke.getByText('clerk1@shop-a.example loses View products (products:read).').waitFor()
    await revoke.getByRole('button', { name: 'Save' }).click()
    const asked = page.getByRole('alertdialog', { name: 'Save 1 change to clerk in shop-a? 1 user loses access.' })
    await asked.waitFor()
    await page.keyboard.press('Escape')
    await asked.waitFor({ state: 'detached' })
    t.ok(await revoke.isVisible(), 'Escape on the question keeps the batch')
    await revoke.getByRole('button', { name: 'Save' }).click()
    await asked.getByRole('button', { name: 'Confirm' }).click()
    await status('Saved 1 change.')
    const revoked = await get('/v2/admin/permissions/roles/clerk?domain=shop-a')
    t.match(inShopA(revoked.permissions), [{ obj: 'orders', act: 'refund' }], 'the API took it back')
    t.equal(inShopA(revoked.permissions).length, 1, 'and only that')
    page.off('request', onBulk)

    // Created while the list shows shop-a: the sub-role is shop-a's, not a platform template.
    await page.getByRole('heading', { name: 'Create a sub-role in shop-a' }).waitFor()
    await page.getByLabel('Code').fill('picker')
    await page.getByLabel('Label').fill('Shop-a picker')
    await page.getByRole('button', { name: 'Create a sub-role' }).click()
    await page.getByRole('alertdialog', { name: 'Create the sub-role picker (Shop-a picker) in shop-a?' }).getByRole('button', { name: 'Confirm' }).click()
    await status('Created picker in shop-a.')
    await page.getByRole('cell', { name: 'Shop-a picker' }).waitFor()
    t.match((await get('/v2/admin/sub-roles?domain=shop-a')).items.find((r) => r.code === 'picker'), { label: 'Shop-a picker' }, "created in the list's domain")
    t.notOk((await get('/v2/admin/sub-roles?domain=shop-b')).items.some((r) => r.code === 'picker'), 'not seen in another merchant')
  })

  await t.test('a user: effective permissions with why, an override with expiry', async (t) => {
    await page.goto(`${server.base}/console/#/users/${clerkId}`)
    await page.getByRole('heading', { name: 'clerk1@shop-a.example' }).waitFor()
    const refund = page.locator('tr[data-pair="orders:refund"]')
    await refund.getByText('granted to clerk in shop-a').waitFor()
    t.equal(await refund.locator('code').count(), 1, 'the why is in words, no raw Casbin row (the one code is the pair)')
    const picker = page.getByLabel('Permission', { exact: true })
    t.equal(await picker.locator('option[value="orders:cancel"]').count(), 1)
    t.equal(await picker.locator('option[value="merchant:onboard"]').count(), 0, "a merchant user's overrides never offer a platform pair")
    await page.getByLabel('Permission', { exact: true }).selectOption('orders:cancel')
    await page.getByLabel('Change').selectOption('grant')
    await page.getByLabel('Expires at (optional, Europe/Madrid time)').fill('2020-01-31T18:00')
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.getByRole('alert').filter({ hasText: 'The expiry is in the past: choose a later time.' }).waitFor()
    t.equal(await page.getByLabel('Expires at (optional, Europe/Madrid time)').inputValue(), '2020-01-31T18:00', 'a past expiry is refused in the form, which keeps what was tried')
    t.notOk(((await get(`/v2/admin/permissions/users/${clerkId}`)).permissions as Array<Record<string, unknown>>).some((p) => p.act === 'cancel'), 'nothing was sent')
    await page.getByLabel('Expires at (optional, Europe/Madrid time)').fill('2099-01-31T18:00')
    await page.getByRole('button', { name: 'Apply' }).click()
    await status('Saved.')
    await page.locator('tr[data-pair="orders:cancel"]').getByText(`allowed for this user by ${ROOT_EMAIL}`).waitFor()
    t.pass('the explanation names who made the override, by e-mail')
    const effective = await get(`/v2/admin/permissions/users/${clerkId}`)
    const cancel = (effective.permissions as Array<Record<string, unknown>>).find((p) => p.act === 'cancel')
    t.match(cancel, { source: 'user', obj: 'orders' }, 'the API has the allow override')
    t.match(String(cancel?.expires_at), /^2099-01-3/, 'with its expiry')
    await page.evaluate(() => window.scrollTo(0, 0))
  await page.screenshot({ path: join(shots, 'user.png') })

    await page.getByLabel('Permission', { exact: true }).selectOption('orders:cancel')
    await page.getByLabel('Change').selectOption('revoke')
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.getByRole('alertdialog', { name: 'Revoke the override of orders:cancel for clerk1@shop-a.example? What it allowed or denied ends now.' }).waitFor()
    t.ok(((await get(`/v2/admin/permissions/users/${clerkId}`)).permissions as Array<Record<string, unknown>>).some((p) => p.act === 'cancel'), 'asked first: the override is still there')
    await page.getByRole('button', { name: 'Confirm' }).click()
    await page.locator('tr[data-pair="orders:cancel"]').getByText('nothing grants it').waitFor()
    const revoked = await get(`/v2/admin/permissions/users/${clerkId}`)
    t.notOk((revoked.permissions as Array<Record<string, unknown>>).some((p) => p.act === 'cancel'), 'the API removed the override')

    await page.getByLabel('Permission', { exact: true }).selectOption('orders:read')
    await page.getByLabel('Change').selectOption('deny')
    await page.getByRole('button', { name: 'Apply' }).click()
    await page.getByRole('alertdialog', { name: 'Deny orders:read to clerk1@shop-a.example? They lose it now, whatever their sub-role grants.' }).getByRole('button', { name: 'Confirm' }).click()
    await page.locator('tr[data-pair="orders:read"]').getByText(`denied for this user by ${ROOT_EMAIL}`).waitFor()
    t.pass('a deny override is explained with who made it')
    t.equal(await page.getByLabel('Change').inputValue(), 'deny', 'after saving, the change stays what was just done (not back to Grant)')
  })

  await t.test('an id from the address bar never becomes another API path', async (t) => {
    const forged = '..\\..\\..\\v2\\admin\\permissions\\holders?obj=orders&act=read'
    const apiPaths = (from: number) => requests.slice(from).flatMap((url) => (new URL(url).pathname.startsWith('/v2/') ? [new URL(url).pathname] : []))
    // A fresh load, as a link from elsewhere opens it (the same document with another hash would not reload).
    await page.goto('about:blank')
    const loaded = requests.length
    await page.goto(`${server.base}/console/#/users/${forged}`)
    await page.getByRole('alert').filter({ hasText: 'This link does not name an account.' }).waitFor()
    t.same(apiPaths(loaded).sort(), ['/v2/profile', '/v2/profile/permissions'], "opening the link asks only the page's own questions")
    const followed = requests.length
    await page.goto(`${server.base}/console/#/users/${clerkId}`)
    await page.getByRole('heading', { name: 'clerk1@shop-a.example' }).waitFor()
    const before = requests.length
    // Without a reload: the hash changes in the open page.
    await page.evaluate((hash) => (location.hash = hash), `#/users/${forged}`)
    await page.getByRole('alert').filter({ hasText: 'This link does not name an account.' }).waitFor()
    t.same(apiPaths(before), [], 'changing the hash in place asks nothing')
    t.notOk(apiPaths(followed).some((path) => path.includes('holders')), 'the holders list was never asked for')
  })

  await t.test('access review and the audit trail', async (t) => {
    await open('Access review')
    await page.getByLabel('Permission').selectOption('orders:refund')
    await page.getByLabel('Domain').selectOption('shop-a')
    await page.getByRole('button', { name: 'Show' }).click()
    await page.getByRole('link', { name: 'clerk1@shop-a.example' }).waitFor()
    const holders = await get('/v2/admin/permissions/holders?obj=orders&act=refund&domain=shop-a')
    t.ok(holders.items.some((h) => h.email === 'clerk1@shop-a.example'), 'the API agrees')

    await open('Audit trail')
    await page.getByText(/Audit chain verified: \d+ entries/).waitFor()
    const filter = page.getByRole('form', { name: 'Filter' })
    // Actions are picked by their words, from the API's own list.
    await filter.getByLabel('Action').selectOption({ label: 'sub-role created' })
    await filter.getByRole('button', { name: 'Filter' }).click()
    await page.getByText('Page 1 of 1 (3 in all)').waitFor()
    t.ok(await page.getByRole('cell', { name: 'sub-role clerk' }).isVisible(), 'the creation is in the trail, its target type in words')
    t.ok(await page.getByRole('cell', { name: 'sub-role picker' }).isVisible(), "and the one in shop-a's domain")
    t.equal(await page.getByRole('cell', { name: 'sub-role created' }).count(), 3, 'the action in words, not its code')
    const rootName = String((await get('/v2/profile')).name)
    t.equal(await page.getByRole('cell', { name: `${rootName} ${ROOT_EMAIL}` }).count(), 3, 'the actor by name and e-mail, not a UUID')
    t.match(await page.locator('tbody time').first().textContent(), /GMT\+1$/, "times are in the browser's zone (Madrid), named")
    t.match(await page.locator('tbody time').first().getAttribute('title'), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/, 'and UTC on hover')

    // A person's e-mail as the target finds what happened to them; the actor filter takes one too.
    await filter.getByLabel('Action').selectOption('')
    await filter.getByLabel('Target (e-mail or id)').fill('clerk2@shop-a.example')
    await filter.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('cell', { name: 'account deactivated' }).waitFor()
    t.ok(await page.getByRole('cell', { name: 'clerk2 clerk2@shop-a.example' }).first().isVisible(), 'the target by name and e-mail')
    const api = await get('/v2/admin/permissions/audit-log?target=clerk2%40shop-a.example')
    await page.getByText(`Page 1 of 1 (${String(api.total)} in all)`).waitFor()
    await filter.getByLabel('Actor (e-mail or id)').fill('owner@shop-b.example')
    await filter.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('status').filter({ hasText: 'No audit entries match these filters.' }).waitFor()
    t.pass('an empty result says so')
    await filter.getByLabel('Actor (e-mail or id)').fill('')
    await filter.getByLabel('Target (e-mail or id)').fill('')
    await filter.getByLabel('Until').fill('2020-01-01')
    await filter.getByRole('button', { name: 'Filter' }).click()
    await page.getByRole('status').filter({ hasText: 'No audit entries match these filters.' }).waitFor()
    t.pass('the date range filters')
    await filter.getByLabel('Until').fill('')
    await filter.getByLabel('Action').selectOption({ label: 'sub-role created' })
    await filter.getByRole('button', { name: 'Filter' }).click()
    await page.getByText('Page 1 of 1 (3 in all)').waitFor()
    await page.screenshot({ path: join(shots, 'audit.png') })
  })

  await t.test("every screen passes an accessibility check: Chromium's accessibility tree names every control and labels every input", async (t) => {
    const cdp = await context.newCDPSession(page)
    const CONTROLS = new Set(['button', 'textbox', 'searchbox', 'combobox', 'listbox', 'checkbox', 'radio', 'link', 'spinbutton', 'slider', 'switch', 'menuitem', 'tab'])
    interface AXNode { ignored?: boolean; role?: { value?: string }; name?: { value?: string }; backendDOMNodeId?: number }
    const unnamed = async () => {
      const { nodes } = (await cdp.send('Accessibility.getFullAXTree')) as { nodes: AXNode[] }
      const controls = nodes.filter((n) => n.ignored !== true && CONTROLS.has(String(n.role?.value)))
      return { count: controls.length, unnamed: controls.filter((n) => String(n.name?.value ?? '').trim() === '').map((n) => String(n.role?.value)) }
    }
    const screens: Array<[string, () => Promise<void>]> = [
      ['Accounts', () => open('Accounts')],
      ['Sub-roles with a matrix', async () => {
        await open('Sub-roles')
        await page.getByRole('button', { name: 'Permissions: clerk' }).click()
        await page.getByRole('heading', { name: /^Permissions of clerk in/ }).waitFor()
        await page.getByRole('radiogroup', { name: 'Cancel orders orders:cancel' }).getByRole('radio', { name: 'Deny' }).check()
        await page.getByRole('button', { name: 'Preview' }).click()
        await page.getByRole('button', { name: 'Save' }).waitFor()
      }],
      ['Access review', () => open('Access review')],
      ['Audit trail', async () => {
        await open('Audit trail')
        await page.locator('tbody tr').first().waitFor()
      }],
      ['Merchants', async () => {
        await open('Merchants')
        await page.getByRole('link', { name: 'Shop A Books' }).waitFor()
      }],
      ['a user', async () => {
        await page.goto(`${server.base}/console/#/users/${clerkId}`)
        await page.getByRole('heading', { name: 'Overrides' }).waitFor()
      }],
      ['Change password', async () => {
        await page.getByRole('link', { name: 'Change password' }).click()
        await page.getByLabel('Current password').waitFor()
      }],
    ]
    for (const [name, reach] of screens) {
      await reach()
      const found = await unnamed()
      t.ok(found.count > 5, `${name}: the tree lists its controls`)
      t.same(found.unnamed, [], `${name}: every control has a name`)
    }
    await cdp.detach()
  })

  await t.test('a refused token (ended, expired, invalid) leads to sign-in and back to the same screen', async (t) => {
    const consoleToken = async () => String(await page.evaluate(() => sessionStorage.getItem('aps.console.token')))
    const cases: Array<[string, string, (token: string) => Promise<void>]> = [
      ['ended', 'Sub-roles', async (token) => void (await apiCall('POST', '/v2/auth/logout', token, { command: 'logout', data: {} }))],
      ['expired', 'Access review', async (token) => {
        const expired = sign({ ...decodePayload(token), exp: nowSeconds() - 30 }, TEST_SECRET)
        t.equal(((await apiCall('GET', '/v2/profile', expired)).json as unknown as { response_code?: string }).response_code, '202', 'the API calls it expired')
        await page.evaluate((value) => sessionStorage.setItem('aps.console.token', value), expired)
      }],
      ['invalid', 'Accounts', async () => void (await page.evaluate(() => sessionStorage.setItem('aps.console.token', 'not-a-token')))],
    ]
    for (const [kind, section, spoil] of cases) {
      await open(section)
      await spoil(await consoleToken())
      // Where the admin goes next; a request the open screen makes meanwhile may already have found the session ended and left the navigation.
      await page.evaluate(() => {
        location.hash = '#/audit'
      })
      await page.getByRole('alert').filter({ hasText: 'Your session ended. Sign in again to go back where you were.' }).waitFor()
      t.equal(await page.getByRole('navigation').count(), 0, `${kind}: no dead screen is left`)
      await page.getByLabel('E-mail').fill(ROOT_EMAIL)
      await page.getByLabel('Password').fill(ROOT_PASSWORD)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.getByRole('heading', { level: 2, name: 'Audit trail' }).waitFor()
      t.pass(`${kind}: signed in again, the screen asked for is back`)
      t.equal(await page.getByText('Your session ended').count(), 0, `${kind}: the notice is gone`)
    }
  })

  await t.test('Spanish, and a refusal from the API shown localised', async (t) => {
    await page.getByLabel('Language').selectOption('es')
    await page.getByRole('link', { name: 'Subroles' }).click()
    await page.getByRole('heading', { level: 2, name: 'Subroles' }).waitFor()
    await page.getByLabel('Código').fill('clerk')
    await page.getByLabel('Etiqueta').fill('Otra')
    await page.getByRole('button', { name: 'Crear un subrol' }).click()
    await page.getByRole('button', { name: 'Confirmar' }).click()
    await page.getByRole('alert').filter({ hasText: 'Ya existe un subrol con el código clerk en este dominio.' }).waitFor()
    await page.getByLabel('Código').fill('clerk_two')
    await page.getByLabel('Etiqueta').fill('x'.repeat(201))
    await page.getByRole('button', { name: 'Crear un subrol' }).click()
    await page.getByRole('button', { name: 'Confirmar' }).click()
    await page.getByRole('alert').filter({ hasText: 'Etiqueta: debe tener como máximo 200 caracteres' }).waitFor()
    t.pass("the API's field error names the field in Spanish")
    await page.route('**/v2/admin/sub-roles', (route) => route.abort('internetdisconnected'))
    await page.getByLabel('Etiqueta').fill('Otra')
    await page.getByRole('button', { name: 'Crear un subrol' }).click()
    await page.getByRole('button', { name: 'Confirmar' }).click()
    await page.getByRole('alert').filter({ hasText: 'No se pudo contactar con el servicio.' }).waitFor()
    t.pass('a request that never reached the service says so in Spanish')
    await page.unroute('**/v2/admin/sub-roles')
    await page.getByRole('button', { name: 'Cancelar' }).click()
    await page.getByLabel('Dominio').selectOption('shop-a')
    await page.getByRole('button', { name: 'Permisos: clerk' }).click()
    await page.getByLabel(/Reembolsar pedidos/).waitFor()
    t.ok(await page.getByRole('group', { name: 'Pedidos' }).isVisible(), 'catalog groups in Spanish, from the API')
    await page.screenshot({ path: join(shots, 'sub-roles-es.png') })
    await page.getByLabel('Idioma').selectOption('en')
    const signedOut = await page.evaluate(() => sessionStorage.getItem('aps.console.token'))
    t.equal((await apiCall('GET', '/v2/profile', signedOut)).status, 200, 'the token works before signing out')
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
    t.equal(await page.evaluate(() => sessionStorage.getItem('aps.console.token')), null, 'signing out forgets the token')
    const refused = await apiCall('GET', '/v2/profile', signedOut)
    t.match({ status: refused.status, code: (refused.json as unknown as { response_code?: string }).response_code }, { status: 401, code: '204' }, 'and ends it on the server')
  })

  await t.test('a merchant admin sees its merchant only', async (t) => {
    await signIn('owner@shop-a.example', 'owner-pass-123')
    const nav = page.getByRole('navigation')
    t.equal(await nav.getByRole('link', { name: 'Merchants' }).count(), 0, 'no merchants section')
    t.equal(await nav.getByRole('link', { name: 'Shadow model' }).count(), 0, 'no shadow model section')
    await page.getByText('Page 1 of 1 (3 in all)').waitFor()
    t.equal(await page.getByText('owner@shop-b.example').count(), 0, "shop-b's owner is not listed")
    t.equal(await page.getByLabel('Merchant', { exact: true }).count(), 0, 'no merchant filter or field')
    await page.goto(`${server.base}/console/#/merchants`)
    await page.getByRole('heading', { level: 2, name: 'Accounts' }).waitFor()
    t.equal(await page.getByText('shop-b').count(), 0, 'a link to the merchants shows its accounts instead')
    await page.goto(`${server.base}/console/#/accounts/shop-b`)
    await page.getByRole('link', { name: 'clerk1@shop-a.example' }).waitFor()
    t.equal(await page.getByText('shop-b').count(), 0, "another merchant's accounts link lists its own merchant's")
    await open('Sub-roles')
    t.equal(await page.getByLabel('Domain').count(), 0, 'no domain picker')
    await page.getByRole('cell', { name: 'Shop-a picker' }).waitFor()
    const ownerToken = await login('owner@shop-a.example', 'owner-pass-123')
    t.equal((await apiCall('GET', '/v2/admin/merchants', ownerToken)).status, 403, 'the API refuses it the merchant list')

    await page.getByRole('link', { name: 'Change password' }).click()
    await page.getByLabel('Current password').fill('owner-pass-123')
    await page.getByLabel('New password').fill('owner-pass-456')
    await page.getByRole('button', { name: 'Change password' }).click()
    await status('Password changed.')
    t.equal((await apiCall('POST', '/v2/auth/login', null, { command: 'login', data: { email: 'owner@shop-a.example', password: 'owner-pass-456' } })).status, 200, 'the new password works')
    await open('Accounts')
    await t.resolves(page.getByRole('link', { name: 'clerk1@shop-a.example' }).waitFor(), 'the console keeps working on the fresh token')
  })

  await t.test('decisions: denials first, filtered by user, pair and time, each row opening its user', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
    const token = await login(ROOT_EMAIL, ROOT_PASSWORD)
    const shopB = (await apiCall('GET', '/v2/admin/accounts?merchant_id=shop-b', token)).json.data.items[0] as unknown as Account
    const clerk = (await apiCall('GET', `/v2/admin/accounts/${clerkId}`, token)).json.data as unknown as Account
    const at = (minute: number) => `2030-06-01T09:${String(minute).padStart(2, '0')}:00.000000Z`
    const events = [
      decisionEvent(clerk, { decision_id: 'dec-1', time: at(1), obj: 'orders', act: 'cancel', allowed: false }),
      decisionEvent(clerk, { decision_id: 'dec-2', time: at(2), obj: 'orders', act: 'refund', allowed: true, reason: { kind: 'role', rule: ['clerk', 'shop-a', 'orders', 'refund', 'allow'] } }),
      decisionEvent(clerk, { decision_id: 'dec-3', time: at(3), obj: 'orders', act: 'refund', allowed: false, reason: { kind: 'user_deny' } }),
      decisionEvent(shopB, { decision_id: 'dec-4', time: at(4), obj: 'orders', act: 'read', allowed: false }),
    ]
    if (db.kind === 'postgres') await insertDecisionEvents(await db.open(), events)
    else {
      // The embedded store is the server's alone while it runs: it is stopped, the events written, and it starts again.
      await server.stop()
      const store = await openPGlite(db.dir as string)
      await insertDecisionEvents(store, events)
      await store.close()
      const restarted = await startServer(t, { env: { DATABASE_URL: db.url, JWT_SECRET: TEST_SECRET, LOG_LEVEL: 'warn', PORT: String(server.port) }, name: 'console server, again' })
      t.equal(restarted.base, server.base, 'the same origin, so the tab keeps its session')
    }

    await signIn(ROOT_EMAIL, ROOT_PASSWORD)
    await open('Decisions')
    const rows = page.locator('tr[data-decision]')
    await rows.first().waitFor()
    t.same(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-decision'))), ['dec-4', 'dec-3', 'dec-1'], 'denials only at first, newest first')
    await page.getByLabel('Show').selectOption('all')
    await page.getByLabel('User id').fill(clerkId)
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.locator('tr[data-decision="dec-2"]').waitFor()
    t.same(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-decision'))), ['dec-3', 'dec-2', 'dec-1'], "all of the user's decisions")
    await page.locator('tr[data-decision="dec-2"]').getByText('granted to clerk in shop-a').waitFor()
    t.equal(await page.locator('tr[data-decision="dec-2"] td').nth(5).locator('code').count(), 0, 'the why in words, no raw Casbin row')
    t.match(await page.locator('tr[data-decision="dec-2"] time').textContent(), /GMT\+2$/, "the time in the browser's zone (Madrid in June), named")
    await page.getByLabel('Permission', { exact: true }).selectOption('orders:refund')
    // datetime-local is in the browser's zone (the context's Europe/Madrid): 09:02:30 UTC as it reads there.
    const zoned = new Intl.DateTimeFormat('sv-SE', {
      timeZone: 'Europe/Madrid',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hour12: false,
    })
    const local = zoned.format(new Date('2030-06-01T09:02:30Z')).replace(' ', 'T')
    await page.getByLabel('From').fill(local)
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.locator('tr[data-decision="dec-2"]').waitFor({ state: 'detached' })
    t.same(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-decision'))), ['dec-3'], 'the pair and the time narrow it')
    await page.screenshot({ path: join(shots, 'decisions.png') })
    await page.locator('tr[data-decision="dec-3"]').getByRole('link', { name: clerkId }).click()
    await page.getByRole('heading', { name: 'clerk1@shop-a.example' }).waitFor()
    t.equal(new URL(page.url()).hash, `#/users/${clerkId}`, "the row opens the user's explanation")
    await page.locator('tr[data-pair="orders:refund"]').getByText('granted to clerk in shop-a').waitFor()

    await page.getByLabel('Language').selectOption('es')
    await open('Decisiones')
    await page.getByRole('columnheader', { name: 'Resultado' }).waitFor()
    t.ok(await page.locator('tr[data-decision="dec-4"]').getByText('denegada').isVisible(), 'in Spanish')
    await page.getByLabel('Idioma').selectOption('en')

    await page.getByRole('button', { name: 'Sign out' }).click()
    await signIn('owner@shop-a.example', 'owner-pass-456')
    await open('Decisions')
    await page.locator('tr[data-decision="dec-3"]').waitFor()
    t.equal(await page.locator('tr[data-decision="dec-4"]').count(), 0, "a merchant admin never sees another merchant's decisions")
  })

  t.same(failures, [], 'no script error, no CSP refusal')
  const origin = new URL(server.base).origin
  t.same(requests.filter((url) => new URL(url).origin !== origin), [], 'no request to another origin')
})
