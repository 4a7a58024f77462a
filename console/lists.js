// Access review, the audit trail and the merchants.
import { html, useContext, useState } from './preact-htm.js'
import { api, command } from './api.js'
import { Ctx, DomainPicker, domainName, Notice, Pager, PairSelect, homeDomain, splitPair, useCatalog, useFormAction, useLoad } from './ui.js'

/** The audit trail's target types (the API's AUDIT_TARGET_TYPES; test/console/i18n.test.ts keeps them equal). */
export const TARGET_TYPES = ['user', 'role', 'permission']

export function ReviewScreen() {
  const { t, me, lang } = useContext(Ctx)
  const catalog = useCatalog()
  const [pair, setPair] = useState('')
  const [domain, setDomain] = useState(homeDomain(me))
  const [asked, setAsked] = useState(null)
  const [data, error] = useLoad(
    () => (asked === null ? Promise.resolve(null) : api('GET', '/v2/admin/permissions/holders', { query: asked })),
    [JSON.stringify(asked), lang],
  )
  const submit = (event) => {
    event.preventDefault()
    if (pair === '') return
    setAsked({ ...splitPair(pair), ...(me.principal_type === 'system_owner' ? { domain } : {}), page: 1 })
  }
  return html`<section>
    <h2>${t('review')}</h2>
    <form onSubmit=${submit} class="filters">
      <label for="review-pair">${t('permission')}</label>
      <${PairSelect} id="review-pair" catalog=${catalog} value=${pair} onChange=${setPair} />
      <${DomainPicker} id="review-domain" value=${domain} onChange=${setDomain} />
      <button type="submit">${t('show')}</button>
    </form>
    <${Notice} error=${error} />
    ${data
      ? html`<h3>${t('holders', { pair: `${asked.obj}:${asked.act}`, domain: domainName(t, data.domain) })}</h3>
          ${data.items.length === 0
            ? html`<p>${t('nothing')}</p>`
            : html`<table>
                <thead><tr><th>${t('email')}</th><th>${t('subRole')}</th><th>${t('via')}</th></tr></thead>
                <tbody>
                  ${data.items.map((h) => html`<tr key=${h.user_id}><td><a href=${`#/users/${h.user_id}`}>${h.email}</a></td><td>${h.sub_role_code}</td><td>${t(`via_${h.via}`)}</td></tr>`)}
                </tbody>
              </table>`}
          <${Pager} page=${data} onPage=${(p) => setAsked({ ...asked, page: p })} />`
      : null}
  </section>`
}

function ChainState() {
  const { t, lang } = useContext(Ctx)
  const [state, error] = useLoad(() => api('GET', '/v2/admin/permissions/audit-log/verification'), [lang])
  if (error) return html`<${Notice} error=${error} />`
  if (!state) return null
  return state.valid
    ? html`<p class="ok chain" role="status">${t('chainValid', { rows: state.rows })}</p>`
    : html`<p class="error chain" role="alert">${t('chainBroken', { message: state.problem.message })}</p>`
}

export function AuditScreen() {
  const { t, me, lang } = useContext(Ctx)
  const [filters, setFilters] = useState({ page: 1 })
  const [data, error] = useLoad(() => api('GET', '/v2/admin/permissions/audit-log', { query: filters }), [JSON.stringify(filters), lang])
  const submit = (event) => {
    event.preventDefault()
    const form = new FormData(event.currentTarget)
    setFilters({ target_type: form.get('target_type'), target_id: form.get('target_id'), action: form.get('action'), page: 1 })
  }
  return html`<section>
    <h2>${t('audit')}</h2>
    ${me.principal_type === 'system_owner' ? html`<${ChainState} />` : null}
    <form onSubmit=${submit} class="filters" aria-label=${t('filter')}>
      <label for="a-type">${t('targetType')}</label>
      <select id="a-type" name="target_type">
        <option value="">${t('any')}</option>
        ${TARGET_TYPES.map((type) => html`<option value=${type}>${t(`targetType_${type}`)}</option>`)}
      </select>
      <label for="a-target">${t('targetId')}</label>
      <input id="a-target" name="target_id" />
      <label for="a-action">${t('action')}</label>
      <input id="a-action" name="action" />
      <button type="submit">${t('filter')}</button>
    </form>
    <${Notice} error=${error} />
    ${data
      ? html`<table>
          <thead><tr><th>${t('when')}</th><th>${t('action')}</th><th>${t('target')}</th><th>${t('permission')}</th><th>${t('domain')}</th><th>${t('actor')}</th></tr></thead>
          <tbody>
            ${data.items.map(
              (e) => html`<tr key=${e.id}>
                <td>${new Date(e.created_at).toLocaleString(lang)}</td>
                <td>${e.action}</td>
                <td>${t(`targetType_${e.target_type}`)} ${e.target_id}</td>
                <td>${e.obj ? `${e.obj}:${e.act}` : ''}</td>
                <td>${e.domain ?? ''}</td>
                <td>${e.actor_type} ${e.actor_id}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
    <${Pager} page=${data} onPage=${(p) => setFilters({ ...filters, page: p })} />
  </section>`
}

export function MerchantsScreen() {
  const { t, lang } = useContext(Ctx)
  const [query, setQuery] = useState({ page: 1 })
  const [data, error, reload] = useLoad(() => api('GET', '/v2/admin/merchants', { query }), [JSON.stringify(query), lang])
  const search = (event) => {
    event.preventDefault()
    setQuery({ q: new FormData(event.currentTarget).get('q'), page: 1 })
  }
  const [onboard, notice] = useFormAction(async (form) => {
    const owner = await api('POST', '/v2/admin/merchants', {
      body: command('onboard-merchant', { merchant_id: form.get('merchant_id'), email: form.get('email'), name: form.get('name'), password: form.get('password') }),
    })
    reload()
    return t('onboarded', { id: owner.merchant_id })
  })
  return html`<section>
    <h2>${t('merchants')}</h2>
    <form onSubmit=${search} class="filters" aria-label=${t('filter')}>
      <label for="m-q">${t('idPrefix')}</label>
      <input id="m-q" name="q" />
      <button type="submit">${t('filter')}</button>
    </form>
    <${Notice} error=${error} />
    ${data
      ? html`<table>
          <thead><tr><th>${t('merchantId')}</th><th>${t('createdAt')}</th><th>${t('admins')}</th></tr></thead>
          <tbody>
            ${data.items.map((m) => html`<tr key=${m.merchant_id}><td>${m.merchant_id}</td><td>${new Date(m.created_at).toLocaleDateString(lang)}</td><td>${m.admins}</td></tr>`)}
          </tbody>
        </table>`
      : null}
    <${Pager} page=${data} onPage=${(p) => setQuery({ ...query, page: p })} />
    <section aria-labelledby="onboard-heading">
      <h3 id="onboard-heading">${t('onboard')}</h3>
      <form onSubmit=${onboard} class="grid">
        <label for="on-id">${t('merchantId')}</label>
        <input id="on-id" name="merchant_id" required />
        <label for="on-email">${t('email')}</label>
        <input id="on-email" name="email" type="email" required />
        <label for="on-name">${t('name')}</label>
        <input id="on-name" name="name" required />
        <label for="on-password">${t('password')}</label>
        <input id="on-password" name="password" type="password" autocomplete="new-password" minlength="8" required />
        <button type="submit">${t('onboard')}</button>
      </form>
      <${Notice} ...${notice} />
    </section>
  </section>`
}
