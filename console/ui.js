// Pieces the screens share.
import { createContext, html, useContext, useEffect, useRef, useState } from './preact-htm.js'
import { ApiError, api, apiLanguage } from './api.js'
import { LANGUAGES, translator } from './i18n.js'

/** `{ t, lang, setLang, me, can }` of the signed-in admin. */
export const Ctx = createContext(null)

/**
 * The API's own text for a refusal (already in the console's language), with
 * the fields it names by the console's names for them; a request that never
 * reached the service says so in the console's language, not the browser's.
 */
export function errorText(error) {
  const t = translator(apiLanguage())
  if (error instanceof ApiError) {
    const fields = error.fields.map((f) => `${fieldName(t, f.field)}: ${f.message}`).join('; ')
    return fields === '' ? error.message : `${error.message} ${fields}`
  }
  if (error instanceof TypeError) return t('networkError')
  return String(error?.message ?? error)
}

/** `merchant_id` → "Merchant id"; a nested field (`checks[0].obj`) keeps its path, its last name translated. */
function fieldName(t, field) {
  const last = /[A-Za-z_]+$/.exec(field)?.[0] ?? field
  return t.has(`field_${last}`) ? field.slice(0, field.length - last.length) + t(`field_${last}`) : field
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
  const [state, setState] = useState({ data: null, error: null, loading: true })
  const [round, setRound] = useState(0)
  useEffect(() => {
    let current = true
    setState((now) => (now.loading ? now : { ...now, loading: true }))
    load().then(
      (data) => current && setState({ data, error: null, loading: false }),
      (error) => current && setState({ data: null, error: errorText(error), loading: false }),
    )
    return () => {
      current = false
    }
  }, [...deps, round])
  return [state.data, state.error, () => setRound((r) => r + 1), state.loading]
}

/**
 * A list's state in words: "Loading…" while its request is in flight (the
 * rows shown meanwhile are the last answer's), and `empty`, a sentence, when
 * the answer holds no row, instead of a bare header.
 */
export function ListState({ loading, data, empty }) {
  const { t } = useContext(Ctx)
  if (loading) return html`<p class="muted" role="status">${t('loading')}</p>`
  if (data && data.items.length === 0) return html`<p role="status">${empty}</p>`
  return null
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
  const { t, me } = useContext(Ctx)
  const merchants = useMerchants()
  if (me.principal_type === 'merchant') return null
  if (!merchants.lists) {
    return html`<label for=${id}>${t('domain')}</label>
      <input id=${id} value=${value} onChange=${(e) => onChange(e.currentTarget.value || 'global')} />`
  }
  // While the list loads the picker is a select already, disabled, so that it never changes kind under the user's hand.
  const items = merchants.items === null ? (value === 'global' ? [] : [{ merchant_id: value }]) : merchants.items
  return html`<label for=${id}>${t('domain')}</label>
    <select id=${id} value=${value} disabled=${merchants.items === null} aria-busy=${merchants.items === null} onChange=${(e) => onChange(e.currentTarget.value)}>
      <option value="global" selected=${value === 'global'}>${t('global')}</option>
      ${items.map((m) => html`<option value=${m.merchant_id} selected=${value === m.merchant_id}>${merchantName(m)}</option>`)}
    </select>`
}

/** A merchant as people know it: its name, and its id when the name is another. */
export const merchantName = (m) => (m.display_name && m.display_name !== m.merchant_id ? `${m.display_name} (${m.merchant_id})` : m.merchant_id)

/** The merchants a system owner may list (others answer null: the API refuses them the list). */
function useMerchants() {
  const { me, can } = useContext(Ctx)
  const lists = me.principal_type === 'system_owner' && can('merchant:onboard')
  const [data] = useLoad(() => (lists ? api('GET', '/v2/admin/merchants', { query: { page_size: 100 } }) : Promise.resolve(null)), [])
  return { lists, items: data?.items ?? null }
}

/**
 * A merchant picked from the merchant list, never typed: `''` is "none"
 * (`noneLabel`, the platform itself or "any"). Without the list (staff
 * without `merchant:onboard`) the id is typed, as the API checks it anyway.
 */
export function MerchantSelect({ id, name, value, onChange, noneLabel }) {
  const { t } = useContext(Ctx)
  const merchants = useMerchants()
  if (!merchants.lists) {
    return html`<label for=${id}>${t('merchant')}</label>
      <input id=${id} name=${name} value=${value} onChange=${(e) => onChange?.(e.currentTarget.value)} />`
  }
  const items = merchants.items ?? []
  return html`<label for=${id}>${t('merchant')}</label>
    <select id=${id} name=${name} value=${value} disabled=${merchants.items === null} aria-busy=${merchants.items === null} onChange=${(e) => onChange?.(e.currentTarget.value)}>
      <option value="" selected=${value === ''}>${noneLabel}</option>
      ${items.map((m) => html`<option value=${m.merchant_id} selected=${value === m.merchant_id}>${merchantName(m)}</option>`)}
    </select>`
}

/**
 * A sub-role picked from the sub-roles known in `domain` (labels shown), so
 * a typo can never name a new one: creating one is its own action on the
 * sub-roles screen. Root sub-roles are left out (the API refuses giving them).
 */
export function SubRoleSelect({ id, name, domain, value, onChange, anyLabel, required = true }) {
  const { t, lang } = useContext(Ctx)
  const [data, error] = useLoad(() => api('GET', '/v2/admin/sub-roles', { query: { domain, page_size: 100 } }), [domain, lang])
  const roles = (data?.items ?? []).filter((r) => !r.is_root)
  return html`<label for=${id}>${t('subRole')}</label>
    <select id=${id} name=${name} value=${value} required=${required} disabled=${data === null && error === null} aria-busy=${data === null} onChange=${(e) => onChange?.(e.currentTarget.value)}>
      <option value="" selected=${value === ''}>${anyLabel ?? t('choose')}</option>
      ${roles.map((r) => html`<option value=${r.code} selected=${value === r.code}>${r.label && r.label !== r.code ? `${r.label} (${r.code})` : r.code}</option>`)}
    </select>
    ${error ? html`<${Notice} error=${error} />` : null}`
}

/**
 * An instant in the browser's zone with the zone named ("27/11/2026, 15:04 CET"),
 * and in UTC on hover and for screen readers' title.
 */
export function Time({ value, dateOnly = false }) {
  const { lang } = useContext(Ctx)
  if (!value) return null
  const date = new Date(value)
  const zone = new Intl.DateTimeFormat(lang, { timeZoneName: 'short' }).formatToParts(date).find((p) => p.type === 'timeZoneName')?.value ?? ''
  const shown = dateOnly ? date.toLocaleDateString(lang) : `${date.toLocaleString(lang, { dateStyle: 'medium', timeStyle: 'short' })} ${zone}`
  return html`<time datetime=${date.toISOString()} title=${`${date.toISOString().replace('T', ' ').slice(0, 19)} UTC`}>${shown}</time>`
}

/** A domain as people read it: `global` in the console's words, a merchant by its id. */
export const domainName = (t, domain) => (domain === 'global' ? t('global') : domain)

/**
 * Why, in words: the Casbin row that decided names the sub-role and domain
 * ("granted to clerk in shop-a"), never shown raw; an override names who made
 * it ("denied for this user by boss@acme") when `authors` knows.
 */
export function because(t, reason, authors = new Map()) {
  const [holder, domain, obj, act] = reason.rule ?? []
  if ((reason.kind === 'role' || reason.kind === 'role_deny') && holder) return t(`why_${reason.kind}`, { role: holder, domain: domainName(t, domain) })
  const author = reason.kind === 'user_allow' || reason.kind === 'user_deny' ? authors.get(`${reason.kind}|${domain}|${obj}:${act}`) : undefined
  if (author) return t(`why_${reason.kind}_by`, { who: author })
  return t(`reason_${reason.kind}`)
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
 * show, and the form is emptied; a refusal is shown as the API words it and
 * the form keeps what was tried. Answers `[onSubmit, notice, busy]`: `busy`
 * is true while the request is in flight (its buttons are disabled then, so
 * a second click sends nothing).
 */
export function useFormAction(action) {
  const [notice, setNotice] = useState({})
  const [busy, setBusy] = useState(false)
  const onSubmit = async (event) => {
    event.preventDefault()
    if (busy) return
    const target = event.currentTarget
    setBusy(true)
    try {
      const status = await action(new FormData(target))
      if (status !== undefined) {
        target.reset()
        setNotice({ status })
      }
    } catch (e) {
      setNotice({ error: errorText(e) })
    } finally {
      setBusy(false)
    }
  }
  return [onSubmit, notice, busy]
}

/**
 * Asks before an action that removes access or creates something: the
 * question names the consequence, Confirm runs `action` (both buttons
 * disabled while it runs), Cancel or Escape drops it. Answers
 * `[ask(question, action), panel]`; `action` answers the status to show.
 */
export function useConfirm() {
  const { t } = useContext(Ctx)
  const [asked, setAsked] = useState(null)
  const [busy, setBusy] = useState(false)
  const [notice, setNotice] = useState({})
  const confirmRef = useRef(null)
  // The question takes the focus, so Enter confirms and Escape cancels from the keyboard at once.
  useEffect(() => {
    if (asked !== null) confirmRef.current?.focus()
  }, [asked])
  const ask = (question, action) => {
    setNotice({})
    setAsked({ question, action })
  }
  const run = async () => {
    setBusy(true)
    try {
      const status = await asked.action()
      setAsked(null)
      setNotice({ status })
    } catch (e) {
      setNotice({ error: errorText(e) })
    } finally {
      setBusy(false)
    }
  }
  const onKeyDown = (event) => {
    if (event.key !== 'Escape') return
    // Escape answers the question only: a batch the question is about stays (the matrix drops its batch on Escape).
    event.stopPropagation()
    if (!busy) setAsked(null)
  }
  const panel = html`${asked
      ? html`<div class="panel confirm" role="alertdialog" aria-label=${asked.question} onKeyDown=${onKeyDown}>
          <p class="preview">${asked.question}</p>
          <button type="button" class="danger" disabled=${busy} onClick=${run} ref=${confirmRef}>${t('confirm')}</button>
          <button type="button" disabled=${busy} onClick=${() => setAsked(null)}>${t('cancel')}</button>
        </div>`
      : null}
    <${Notice} ...${notice} />`
  return [ask, panel]
}
