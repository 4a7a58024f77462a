// Access review, the audit trail and the merchants.
import { html, useContext, useState } from './preact-htm.js'
import { api, command } from './api.js'
import { Ctx, DomainPicker, ListState, Time, domainName, Notice, Pager, PairSelect, homeDomain, splitPair, useCatalog, useFormAction, useLoad } from './ui.js'

/** The audit trail's target types (the API's AUDIT_TARGET_TYPES; test/console/i18n.test.ts keeps them equal). */
export const TARGET_TYPES = ['user', 'role', 'permission']

export function ReviewScreen() {
  const { t, me, lang } = useContext(Ctx)
  const catalog = useCatalog()
  const [pair, setPair] = useState('')
  const [domain, setDomain] = useState(homeDomain(me))
  const [asked, setAsked] = useState(null)
  const [data, error, , loading] = useLoad(
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
    ${asked !== null && loading ? html`<${ListState} loading=${true} />` : null}
    ${data
      ? html`<h3>${t('holders', { pair: `${asked.obj}:${asked.act}`, domain: domainName(t, data.domain) })}</h3>
          ${data.items.length === 0
            ? html`<p role="status">${t('noHolders', { pair: `${asked.obj}:${asked.act}`, domain: domainName(t, data.domain) })}</p>`
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

/** The API's audit actions (AUDIT_ACTIONS of src/domain/audit.ts; test/console/i18n.test.ts keeps them equal), offered by their words. */
export const AUDIT_ACTIONS = ['grant', 'revoke', 'deny', 'register', 'onboard', 'catalog_added', 'catalog_deactivated', 'catalog_reactivated', 'role_changed', 'deactivated', 'reactivated', 'password_changed', 'password_reset', 'override_expired', 'sub_role_created', 'logged_out', 'logged_out_everywhere']

/** An account as people know it: name and e-mail when the API could say (the caller's tenant), else the kind and id. */
function Who({ kind, id, email, name }) {
  const { t } = useContext(Ctx)
  if (email) return html`<span title=${id}>${name} <span class="muted">${email}</span></span>`
  if (id === 'system') return html`<span>${t('theService')}</span>`
  return html`<span>${kind} <code>${id}</code></span>`
}

export function AuditScreen() {
  const { t, me, lang } = useContext(Ctx)
  const [filters, setFilters] = useState({ page: 1 })
  const [data, error, , loading] = useLoad(() => api('GET', '/v2/admin/permissions/audit-log', { query: filters }), [JSON.stringify(filters), lang])
  const submit = (event) => {
    event.preventDefault()
    const form = new FormData(event.currentTarget)
    // Dates are the admin's own days (the browser's zone): from the start of `from` to the end of `until`.
    const day = (value, next) => {
      if (!value) return undefined
      const date = new Date(`${value}T00:00`)
      if (next) date.setDate(date.getDate() + 1)
      return date.toISOString()
    }
    setFilters({
      target_type: form.get('target_type'),
      target: form.get('target') || undefined,
      actor: form.get('actor') || undefined,
      action: form.get('action'),
      from: day(form.get('from'), false),
      until: day(form.get('until'), true),
      page: 1,
    })
  }
  const targetOf = (e) =>
    e.target_type === 'user'
      ? html`<${Who} kind=${t('targetType_user')} id=${e.target_id} email=${e.target_email} name=${e.target_name} />`
      : html`${t(`targetType_${e.target_type}`)} ${e.target_id}`
  return html`<section>
    <h2>${t('audit')}</h2>
    ${me.principal_type === 'system_owner' ? html`<${ChainState} />` : null}
    <form onSubmit=${submit} class="filters" aria-label=${t('filter')}>
      <label for="a-action">${t('action')}</label>
      <select id="a-action" name="action">
        <option value="">${t('any')}</option>
        ${AUDIT_ACTIONS.map((action) => html`<option value=${action}>${t(`action_${action}`)}</option>`)}
      </select>
      <label for="a-actor">${t('actorFilter')}</label>
      <input id="a-actor" name="actor" />
      <label for="a-type">${t('targetType')}</label>
      <select id="a-type" name="target_type">
        <option value="">${t('any')}</option>
        ${TARGET_TYPES.map((type) => html`<option value=${type}>${t(`targetType_${type}`)}</option>`)}
      </select>
      <label for="a-target">${t('targetFilter')}</label>
      <input id="a-target" name="target" />
      <label for="a-from">${t('fromDay')}</label>
      <input id="a-from" name="from" type="date" />
      <label for="a-until">${t('untilDay')}</label>
      <input id="a-until" name="until" type="date" />
      <button type="submit">${t('filter')}</button>
    </form>
    <${Notice} error=${error} />
    <${ListState} loading=${loading} data=${data} empty=${t('noAuditEntries')} />
    ${data && data.items.length > 0
      ? html`<table>
          <thead><tr><th>${t('when')}</th><th>${t('action')}</th><th>${t('target')}</th><th>${t('permission')}</th><th>${t('domain')}</th><th>${t('actor')}</th></tr></thead>
          <tbody>
            ${data.items.map(
              (e) => html`<tr key=${e.id}>
                <td><${Time} value=${e.created_at} /></td>
                <td>${t.has(`action_${e.action}`) ? t(`action_${e.action}`) : e.action}</td>
                <td>${targetOf(e)}</td>
                <td>${e.obj ? `${e.obj}:${e.act}` : ''}</td>
                <td>${e.domain ? domainName(t, e.domain) : ''}</td>
                <td><${Who} kind=${e.actor_type} id=${e.actor_id} email=${e.actor_email} name=${e.actor_name} /></td>
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
  const [data, error, reload, loading] = useLoad(() => api('GET', '/v2/admin/merchants', { query }), [JSON.stringify(query), lang])
  const search = (event) => {
    event.preventDefault()
    setQuery({ q: new FormData(event.currentTarget).get('q'), page: 1 })
  }
  const [onboard, notice] = useFormAction(async (form) => {
    const displayName = String(form.get('display_name') ?? '').trim()
    const owner = await api('POST', '/v2/admin/merchants', {
      body: command('onboard-merchant', {
        merchant_id: form.get('merchant_id'),
        email: form.get('email'),
        name: form.get('name'),
        password: form.get('password'),
        ...(displayName === '' ? {} : { display_name: displayName }),
      }),
    })
    reload()
    return t('onboarded', { id: owner.merchant_id })
  })
  return html`<section>
    <h2>${t('merchants')}</h2>
    <form onSubmit=${search} class="filters" aria-label=${t('filter')}>
      <label for="m-q">${t('merchantSearch')}</label>
      <input id="m-q" name="q" />
      <button type="submit">${t('filter')}</button>
    </form>
    <${Notice} error=${error} />
    <${ListState} loading=${loading} data=${data} empty=${query.q ? t('noMerchantsMatch') : t('noMerchants')} />
    ${data && data.items.length > 0
      ? html`<table>
          <thead><tr><th>${t('displayName')}</th><th>${t('merchantId')}</th><th>${t('createdAt')}</th><th>${t('admins')}</th></tr></thead>
          <tbody>
            ${data.items.map(
              (m) => html`<tr key=${m.merchant_id} data-merchant=${m.merchant_id}>
                <td><a href=${`#/accounts/${m.merchant_id}`} title=${t('merchantAccounts', { name: m.display_name })}>${m.display_name}</a></td>
                <td><code>${m.merchant_id}</code></td>
                <td><${Time} value=${m.created_at} dateOnly=${true} /></td>
                <td>${m.admins}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
    <${Pager} page=${data} onPage=${(p) => setQuery({ ...query, page: p })} />
    <section aria-labelledby="onboard-heading">
      <h3 id="onboard-heading">${t('onboard')}</h3>
      <form onSubmit=${onboard} class="grid">
        <label for="on-id">${t('merchantId')}</label>
        <input id="on-id" name="merchant_id" required />
        <label for="on-display-name">${t('displayNameOptional')}</label>
        <input id="on-display-name" name="display_name" maxlength="120" />
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
