// The denial trail: the gateway's logged decisions, denials first (the
// default view), filtered by user, pair and time; each row links to that
// user's screen, which explains every pair of theirs.
import { html, useContext, useState } from './preact-htm.js'
import { api } from './api.js'
import { USER_ID } from './routes.js'
import { Ctx, ListState, Notice, PairSelect, Time, because, splitPair, useCatalog, useLoad } from './ui.js'

/** A `datetime-local` value (the admin's own time zone) as an instant the API reads; empty stays unset. */
const instant = (local) => (local ? new Date(local).toISOString() : undefined)

export function DecisionsScreen() {
  const { t, lang } = useContext(Ctx)
  const catalog = useCatalog()
  const [pair, setPair] = useState('')
  const [filters, setFilters] = useState({ allowed: 'false' })
  // The cursors of the pages before this one: "previous" goes back one, keyset paging has no page numbers.
  const [cursors, setCursors] = useState([])
  const cursor = cursors[cursors.length - 1]
  const [data, error, , loading] = useLoad(() => api('GET', '/v2/admin/decisions', { query: { ...filters, cursor, limit: 50 } }), [JSON.stringify(filters), cursor, lang])
  const [formError, setFormError] = useState(null)
  const submit = (event) => {
    event.preventDefault()
    const form = new FormData(event.currentTarget)
    const user = String(form.get('user_id') ?? '').trim()
    if (user !== '' && !USER_ID.test(user)) {
      setFormError(t('decisionUserInvalid'))
      return
    }
    setFormError(null)
    const shown = form.get('allowed')
    setFilters({
      allowed: shown === 'all' ? undefined : shown,
      user_id: user || undefined,
      ...(pair === '' ? {} : splitPair(pair)),
      from: instant(form.get('from')),
      to: instant(form.get('to')),
    })
    setCursors([])
  }
  return html`<section>
    <h2>${t('decisions')}</h2>
    <form onSubmit=${submit} class="filters" aria-label=${t('filter')}>
      <label for="dec-allowed">${t('decisionShown')}</label>
      <select id="dec-allowed" name="allowed">
        <option value="false">${t('decisionDenies')}</option>
        <option value="all">${t('decisionAll')}</option>
        <option value="true">${t('decisionAllows')}</option>
      </select>
      <label for="dec-user">${t('decisionUser')}</label>
      <input id="dec-user" name="user_id" />
      <label for="dec-pair">${t('permission')}</label>
      <${PairSelect} id="dec-pair" catalog=${catalog} value=${pair} onChange=${setPair} required=${false} />
      <label for="dec-from">${t('decisionFrom')}</label>
      <input id="dec-from" name="from" type="datetime-local" step="1" />
      <label for="dec-to">${t('decisionTo')}</label>
      <input id="dec-to" name="to" type="datetime-local" step="1" />
      <button type="submit">${t('filter')}</button>
    </form>
    <${Notice} error=${formError ?? error} />
    <${ListState} loading=${loading} data=${data} empty=${t('noDecisions')} />
    ${data
      ? data.items.length === 0
        ? null
        : html`<table class="decisions">
            <thead>
              <tr><th>${t('when')}</th><th>${t('decisionUser')}</th><th>${t('permission')}</th><th>${t('domain')}</th><th>${t('decisionOutcome')}</th><th>${t('why')}</th><th>${t('decisionId')}</th></tr>
            </thead>
            <tbody>
              ${data.items.map(
                (d) => html`<tr key=${d.decision_id} data-decision=${d.decision_id} class=${d.allowed ? 'allowed' : 'denied'}>
                  <td><${Time} value=${d.time} /></td>
                  <td>${USER_ID.test(d.subject.user_id) ? html`<a href=${`#/users/${d.subject.user_id}`}>${d.subject.user_id}</a>` : d.subject.user_id}</td>
                  <td><code>${d.obj}:${d.act}</code></td>
                  <td>${d.domain}</td>
                  <td>${d.allowed ? t('decisionAllowed') : t('decisionDenied')}</td>
                  <td>${because(t, d.reason)}</td>
                  <td><code>${d.decision_id}</code></td>
                </tr>`,
              )}
            </tbody>
          </table>`
      : null}
    <div class="pager">
      <button type="button" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>${t('previous')}</button>
      <button type="button" disabled=${!data?.next_cursor} onClick=${() => setCursors([...cursors, data.next_cursor])}>${t('next')}</button>
    </div>
  </section>`
}
