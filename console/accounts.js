// Accounts: the list, registration, sub-role changes, switching off and on; one user's permissions.
import { html, useContext, useState } from './preact-htm.js'
import { api, command } from './api.js'
import { apiPath } from './routes.js'
import { Ctx, DomainPicker, ListState, Time, because, domainName, MerchantSelect, Notice, Pager, PairSelect, errorText, grantableIn, homeDomain, splitPair, SubRoleSelect, useCatalog, useConfirm, useFormAction, useLoad } from './ui.js'

function RegisterForm({ onDone }) {
  const { t, me } = useContext(Ctx)
  const [merchant, setMerchant] = useState('')
  const [subRole, setSubRole] = useState('')
  const [submit, notice] = useFormAction(async (form) => {
    const data = { email: form.get('email'), name: form.get('name'), password: form.get('password'), sub_role_code: subRole }
    if (merchant !== '') data.merchant_id = merchant
    const account = await api('POST', '/v2/admin/register', { body: command('register-admin', data) })
    setSubRole('')
    onDone()
    return t('registered', { email: account.email })
  })
  // The sub-roles offered are those of the domain the account will live in.
  const domain = me.principal_type === 'merchant' ? me.merchant_id : merchant === '' ? 'global' : merchant
  return html`<section aria-labelledby="register-heading">
    <h3 id="register-heading">${t('register')}</h3>
    <form onSubmit=${submit} class="grid">
      <label for="reg-email">${t('email')}</label>
      <input id="reg-email" name="email" type="email" required />
      <label for="reg-name">${t('name')}</label>
      <input id="reg-name" name="name" required />
      <label for="reg-password">${t('password')}</label>
      <input id="reg-password" name="password" type="password" autocomplete="new-password" minlength="8" required />
      ${me.principal_type === 'system_owner'
        ? html`<${MerchantSelect} id="reg-merchant" value=${merchant} onChange=${(m) => { setMerchant(m); setSubRole('') }} noneLabel=${t('platformNoMerchant')} />`
        : null}
      <${SubRoleSelect} id="reg-sub-role" domain=${domain} value=${subRole} onChange=${setSubRole} />
      <button type="submit">${t('register')}</button>
    </form>
    <${Notice} ...${notice} />
  </section>`
}

function SubRoleChange({ account, onDone, onCancel }) {
  const { t } = useContext(Ctx)
  const [code, setCode] = useState(account.sub_role_code)
  const [ask, confirmation] = useConfirm()
  // Moving an account takes away what its old sub-role held and the new one does not: asked first.
  const submit = (event) => {
    event.preventDefault()
    ask(t('confirmSubRoleChange', { email: account.email, from: account.sub_role_code, to: code }), async () => {
      await api('POST', apiPath`/v2/admin/accounts/${account.id}/sub-role`, { body: command('change-sub-role', { sub_role_code: code }) })
      onDone(t('saved'))
      return undefined
    })
  }
  return html`<form onSubmit=${submit} class="panel" aria-label=${t('newSubRoleFor', { email: account.email })} onKeyDown=${(e) => e.key === 'Escape' && onCancel()}>
    <p class="preview">${t('newSubRoleFor', { email: account.email })}</p>
    <${SubRoleSelect} id="new-sub-role" domain=${homeDomain(account)} value=${code} onChange=${setCode} />
    <button type="submit">${t('apply')}</button>
    <button type="button" onClick=${onCancel}>${t('cancel')}</button>
    ${confirmation}
  </form>`
}

/** The accounts, of one merchant when `merchant` names it (a merchant's row opens its accounts: `#/accounts/<merchant id>`). */
export function AccountsScreen({ merchant = null }) {
  const { t, me, can, lang } = useContext(Ctx)
  const [filters, setFilters] = useState(merchant === null ? { page: 1 } : { merchant_id: merchant, page: 1 })
  const [merchantFilter, setMerchantFilter] = useState(merchant ?? '')
  const [editing, setEditing] = useState(null)
  const [notice, setNotice] = useState({})
  const [page, error, reload, loading] = useLoad(() => api('GET', '/v2/admin/accounts', { query: filters }), [JSON.stringify(filters), lang])
  const applyFilters = (event) => {
    event.preventDefault()
    const form = new FormData(event.currentTarget)
    setFilters({ q: form.get('q'), status: form.get('status'), sub_role_code: form.get('sub_role_code'), merchant_id: form.get('merchant_id') ?? undefined, page: 1 })
  }
  const [ask, confirmation] = useConfirm()
  const switchAccount = async (account, path, name) => {
    await api('POST', apiPath`/v2/admin/accounts/${account.id}/${path}`, { body: command(name, {}) })
    reload()
    return t('saved')
  }
  // Switching an account off ends its sessions at once: asked first, naming the account and that consequence.
  const deactivate = (account) => ask(t('confirmDeactivate', { email: account.email }), () => switchAccount(account, 'deactivate', 'deactivate-admin'))
  const [busy, setBusy] = useState(false)
  const reactivate = async (account) => {
    setBusy(true)
    try {
      setNotice({ status: await switchAccount(account, 'reactivate', 'reactivate-admin') })
    } catch (e) {
      setNotice({ error: errorText(e) })
    } finally {
      setBusy(false)
    }
  }
  // Only what may be done is offered: the API says per row what the rules let this admin do (allowed_actions).
  const manage = can('admin:manage')
  return html`<section>
    <h2>${t('accounts')}</h2>
    <form onSubmit=${applyFilters} class="filters" aria-label=${t('filter')}>
      <label for="f-q">${t('search')}</label>
      <input id="f-q" name="q" />
      <label for="f-status">${t('status')}</label>
      <select id="f-status" name="status">
        <option value="">${t('any')}</option>
        <option value="active">${t('active')}</option>
        <option value="deactivated">${t('deactivated')}</option>
      </select>
      ${me.principal_type === 'system_owner' ? html`<${MerchantSelect} id="f-merchant" name="merchant_id" value=${merchantFilter} onChange=${setMerchantFilter} noneLabel=${t('any')} />` : null}
      <${SubRoleSelect} id="f-sub-role" name="sub_role_code" domain=${merchantFilter === '' ? homeDomain(me) : merchantFilter} required=${false} anyLabel=${t('any')} />
      <button type="submit">${t('filter')}</button>
    </form>
    <${Notice} error=${error} />
    <${Notice} ...${notice} />
    ${confirmation}
    ${editing
      ? html`<${SubRoleChange}
          account=${editing}
          onCancel=${() => setEditing(null)}
          onDone=${(status) => {
            setEditing(null)
            setNotice({ status })
            reload()
          }}
        />`
      : null}
    <${ListState} loading=${loading} data=${page} empty=${t('noAccounts')} />
    ${page && page.items.length > 0
      ? html`<table>
          <thead>
            <tr><th>${t('email')}</th><th>${t('name')}</th><th>${t('merchant')}</th><th>${t('subRole')}</th><th>${t('status')}</th><th>${t('actions')}</th></tr>
          </thead>
          <tbody>
            ${page.items.map(
              (a) => html`<tr key=${a.id}>
                <td><a href=${`#/users/${a.id}`}>${a.email}</a></td>
                <td>${a.name}</td>
                <td>${a.merchant_id ?? t('global')}</td>
                <td>${a.sub_role_code}</td>
                <td>${t(a.status)}</td>
                <td class="actions">
                  ${manage && a.allowed_actions.includes('change-sub-role')
                    ? html`<button type="button" aria-label=${`${t('changeSubRole')}: ${a.email}`} onClick=${() => setEditing(a)}>${t('changeSubRole')}</button>`
                    : null}
                  ${manage && a.id !== me.id && a.allowed_actions.includes('deactivate')
                    ? html`<button type="button" aria-label=${`${t('deactivate')}: ${a.email}`} onClick=${() => deactivate(a)}>${t('deactivate')}</button>`
                    : null}
                  ${manage && a.allowed_actions.includes('reactivate')
                    ? html`<button type="button" aria-label=${`${t('reactivate')}: ${a.email}`} disabled=${busy} onClick=${() => reactivate(a)}>${t('reactivate')}</button>`
                    : null}
                </td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
    <${Pager} page=${page} onPage=${(p) => setFilters({ ...filters, page: p })} />
    ${can('admin:register') ? html`<${RegisterForm} onDone=${reload} />` : null}
  </section>`
}

function OverrideForm({ user, domain, catalog, onDone }) {
  const { t, me } = useContext(Ctx)
  const [pair, setPair] = useState('')
  const [ask, confirmation] = useConfirm()
  const [submit, notice, busy] = useFormAction(async (form) => {
    const effect = form.get('effect')
    const data = { ...splitPair(pair) }
    if (me.principal_type === 'system_owner') data.domain = domain
    const expires = form.get('expires_at')
    // A past instant is refused here, in the admin's zone and words, before the API would refuse it in UTC.
    if (effect !== 'revoke' && expires && new Date(expires).getTime() <= Date.now()) throw new Error(t('expiryInPast'))
    if (effect !== 'revoke' && expires) data.expires_at = new Date(expires).toISOString()
    const names = { grant: ['POST', 'grant', 'grant-user-permission'], deny: ['POST', 'deny', 'deny-user-permission'], revoke: ['DELETE', 'revoke', 'revoke-user-permission'] }
    const [method, path, name] = names[effect]
    const write = async () => {
      await api(method, apiPath`/v2/admin/permissions/users/${user.id}/${path}`, { body: command(name, data) })
      onDone()
      return t('saved')
    }
    // A deny or a revocation may take access away at once: asked first, naming whom and what.
    if (effect === 'grant') return write()
    ask(t(effect === 'deny' ? 'confirmDeny' : 'confirmRevokeOverride', { email: user.email, pair }), write)
    return undefined
  })
  return html`<section aria-labelledby="overrides-heading">
    <h3 id="overrides-heading">${t('overrides')}</h3>
    <form onSubmit=${submit} class="grid">
      <label for="ov-pair">${t('permission')}</label>
      <${PairSelect} id="ov-pair" catalog=${grantableIn(catalog, domain, user)} value=${pair} onChange=${setPair} />
      <label for="ov-effect">${t('effect')}</label>
      <select id="ov-effect" name="effect">
        <option value="grant">${t('grant')}</option>
        <option value="deny">${t('deny')}</option>
        <option value="revoke">${t('revoke')}</option>
      </select>
      <label for="ov-expires">${t('expiresAtZone', { zone: Intl.DateTimeFormat().resolvedOptions().timeZone })}</label>
      <input id="ov-expires" name="expires_at" type="datetime-local" />
      <button type="submit" disabled=${busy}>${t('apply')}</button>
    </form>
    <${Notice} ...${notice} />
    ${confirmation}
  </section>`
}

/**
 * Who made each of a user's overrides: the newest grant or deny of the pair in
 * the audit trail (newest first), by e-mail; keyed as `because` looks them up.
 * An override older than the trail's last page shows without its author.
 */
async function overrideAuthors(t, userId) {
  const trail = await api('GET', '/v2/admin/permissions/audit-log', { query: { target_type: 'user', target_id: userId, page_size: 100 } }).catch(() => ({ items: [] }))
  const authors = new Map()
  // Only the newest change of a pair counts: after a revoke, an expiry or the other effect, an older entry no longer describes the override.
  const seen = new Set()
  for (const e of trail.items) {
    const pair = `${e.domain}|${e.obj}:${e.act}`
    if (!e.obj || seen.has(pair)) continue
    seen.add(pair)
    const kind = e.action === 'grant' ? 'user_allow' : e.action === 'deny' ? 'user_deny' : null
    if (kind !== null) authors.set(`${kind}|${pair}`, e.actor_email ?? (e.actor_id === 'system' ? t('theService') : e.actor_id))
  }
  return authors
}

export function UserScreen({ userId }) {
  const { t, me, can, lang } = useContext(Ctx)
  const catalog = useCatalog()
  const [account, accountError] = useLoad(() => api('GET', apiPath`/v2/admin/accounts/${userId}`), [userId, lang])
  const [domain, setDomain] = useState(null)
  const shownDomain = domain ?? (account ? homeDomain(account) : null)
  const [view, viewError, reload] = useLoad(async () => {
    if (shownDomain === null || catalog === null) return null
    const query = me.principal_type === 'system_owner' ? { domain: shownDomain } : {}
    const effective = await api('GET', apiPath`/v2/admin/permissions/users/${userId}`, { query })
    const checks = catalog.map((e) => ({ obj: e.obj, act: e.act, ...(me.principal_type === 'system_owner' ? { domain: shownDomain } : {}) }))
    const [explained, authors] = await Promise.all([
      checks.length === 0 ? { results: [] } : api('POST', '/v2/authz/check-batch', { body: command('check-batch', { user_id: userId, explain: true, checks }) }),
      overrideAuthors(t, userId),
    ])
    return { effective, explained: explained.results, authors }
  }, [userId, shownDomain, catalog === null, lang])
  if (accountError) return html`<${Notice} error=${accountError} />`
  if (!account || !view) return html`<p>${t('loading')}</p>`
  const byPair = new Map(view.effective.permissions.map((p) => [`${p.obj}:${p.act}`, p]))
  return html`<section>
    <p><a href="#/accounts">${t('back')}</a></p>
    <h2>${account.email}</h2>
    <p>${account.name} · ${account.merchant_id ?? t('global')} · ${account.sub_role_code} · ${t(account.status)}</p>
    <${DomainPicker} id="user-domain" value=${shownDomain} onChange=${setDomain} />
    <${Notice} error=${viewError} />
    <h3>${t('effective', { domain: domainName(t, view.effective.domain) })}</h3>
    <table>
      <thead><tr><th>${t('permission')}</th><th>${t('allowed')}</th><th>${t('why')}</th><th>${t('expires')}</th></tr></thead>
      <tbody>
        ${catalog.map((entry, i) => {
          const key = `${entry.obj}:${entry.act}`
          const result = view.explained[i]
          const held = byPair.get(key)
          return html`<tr key=${key} data-pair=${key}>
            <td>${entry.label} <code>${key}</code></td>
            <td>${result?.allowed ? t('yes') : t('no')}</td>
            <td>${result?.reason ? because(t, result.reason, view.authors) : ''}</td>
            <td><${Time} value=${held?.expires_at} /></td>
          </tr>`
        })}
      </tbody>
    </table>
    ${can('permission:assign') ? html`<${OverrideForm} user=${account} domain=${shownDomain} catalog=${catalog} onDone=${reload} />` : null}
  </section>`
}
