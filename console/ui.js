// Pieces the screens share.
import { createContext, html, useContext, useEffect, useState } from './preact-htm.js'
import { ApiError, api } from './api.js'
import { LANGUAGES } from './i18n.js'

/** `{ t, lang, setLang, me, can }` of the signed-in admin. */
export const Ctx = createContext(null)

/** The API's own text for a refusal (already in the console's language), with the fields it names. */
export function errorText(error) {
  if (error instanceof ApiError) {
    const fields = error.fields.map((f) => `${f.field}: ${f.message}`).join('; ')
    return fields === '' ? error.message : `${error.message} ${fields}`
  }
  return String(error?.message ?? error)
}

/** An error (announced at once) or a confirmation. */
export function Notice({ error, status }) {
  if (error) return html`<p class="error" role="alert">${error}</p>`
  if (status) return html`<p class="ok" role="status">${status}</p>`
  return null
}

export function LanguageSwitch() {
  const { t, lang, setLang } = useContext(Ctx)
  return html`<span class="language">
    <label for="language">${t('language')}</label>
    <select id="language" value=${lang} onChange=${(e) => setLang(e.currentTarget.value)}>
      ${LANGUAGES.map(([code, name]) => html`<option value=${code} selected=${code === lang}>${name}</option>`)}
    </select>
  </span>`
}

/**
 * Loads with `load()` whenever one of `deps` changes; answers
 * `[data, error, reload]`. A refusal from the API is the error, shown by the screen.
 */
export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null })
  const [round, setRound] = useState(0)
  useEffect(() => {
    let current = true
    load().then(
      (data) => current && setState({ data, error: null }),
      (error) => current && setState({ data: null, error: errorText(error) }),
    )
    return () => {
      current = false
    }
  }, [...deps, round])
  return [state.data, state.error, () => setRound((r) => r + 1)]
}

/** Previous / next for a page of the API's paging shape. */
export function Pager({ page, onPage }) {
  const { t } = useContext(Ctx)
  if (!page) return null
  const pages = Math.max(1, Math.ceil(page.total / page.page_size))
  return html`<div class="pager">
    <button type="button" disabled=${page.page <= 1} onClick=${() => onPage(page.page - 1)}>${t('previous')}</button>
    <span>${t('pageOf', { page: page.page, pages, total: page.total })}</span>
    <button type="button" disabled=${page.page >= pages} onClick=${() => onPage(page.page + 1)}>${t('next')}</button>
  </div>`
}

/**
 * The domain a screen works in. Merchant admins have theirs only (the API
 * forces it anyway), so they get no picker; platform staff pick `global` or
 * a merchant (from the merchant list when they may read it).
 */
export function DomainPicker({ id, value, onChange }) {
  const { t, me, can } = useContext(Ctx)
  const listsMerchants = me.principal_type === 'system_owner' && can('merchant:onboard')
  const [merchants] = useLoad(() => (listsMerchants ? api('GET', '/v2/admin/merchants', { query: { page_size: 100 } }) : Promise.resolve(null)), [])
  if (me.principal_type === 'merchant') return null
  if (!listsMerchants) {
    return html`<label for=${id}>${t('domain')}</label>
      <input id=${id} value=${value} onChange=${(e) => onChange(e.currentTarget.value || 'global')} />`
  }
  // While the list loads the picker is a select already, disabled, so that it never changes kind under the user's hand.
  const ids = merchants === null ? (value === 'global' ? [] : [value]) : merchants.items.map((m) => m.merchant_id)
  return html`<label for=${id}>${t('domain')}</label>
    <select id=${id} value=${value} disabled=${merchants === null} aria-busy=${merchants === null} onChange=${(e) => onChange(e.currentTarget.value)}>
      <option value="global" selected=${value === 'global'}>global</option>
      ${ids.map((m) => html`<option value=${m} selected=${value === m}>${m}</option>`)}
    </select>`
}

/** The caller's home domain: where its screens start. */
export const homeDomain = (me) => (me.principal_type === 'merchant' ? me.merchant_id : 'global')

/** The active catalog, in the console's language (the API localises labels and groups). */
export function useCatalog() {
  const { lang } = useContext(Ctx)
  const [data] = useLoad(() => api('GET', '/v2/admin/permissions/catalog'), [lang])
  return data === null ? null : data.items.filter((e) => e.is_active)
}

/**
 * The pairs that can be granted, denied or overridden in `domain` (for
 * `user`, when an account is the target): `platform` pairs only in `global`
 * and never for a merchant account, which the API refuses (code 111).
 */
export const grantableIn = (catalog, domain, user = null) =>
  catalog.filter((e) => e.scope !== 'platform' || (domain === 'global' && user?.principal_type !== 'merchant'))

/** A select of catalog pairs (`obj:act`), grouped as the catalog groups them. */
export function PairSelect({ id, catalog, value, onChange, required = true }) {
  const groups = new Map()
  for (const entry of catalog ?? []) {
    const list = groups.get(entry.group_name) ?? []
    list.push(entry)
    groups.set(entry.group_name, list)
  }
  return html`<select id=${id} value=${value} onChange=${(e) => onChange(e.currentTarget.value)} required=${required}>
    <option value="">—</option>
    ${[...groups].map(
      ([group, entries]) => html`<optgroup label=${group}>
        ${entries.map((e) => html`<option value=${`${e.obj}:${e.act}`} selected=${value === `${e.obj}:${e.act}`}>${e.label} (${e.obj}:${e.act})</option>`)}
      </optgroup>`,
    )}
  </select>`
}

export const splitPair = (pair) => {
  const at = pair.indexOf(':')
  return { obj: pair.slice(0, at), act: pair.slice(at + 1) }
}

/**
 * A form's submit handler: `action(formData)` answers the confirmation to
 * show, and the form is emptied; a refusal is shown as the API words it.
 * Answers `[onSubmit, notice]` for `<form onSubmit>` and `<Notice>`.
 */
export function useFormAction(action) {
  const [notice, setNotice] = useState({})
  const onSubmit = async (event) => {
    event.preventDefault()
    const target = event.currentTarget
    try {
      const status = await action(new FormData(target))
      target.reset()
      setNotice({ status })
    } catch (e) {
      setNotice({ error: errorText(e) })
    }
  }
  return [onSubmit, notice]
}
