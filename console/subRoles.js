// Sub-roles: the list in a domain, creation with a label, and the permission
// matrix where a batch of grants, denies and revokes is previewed (dry run)
// before it is saved.
import { html, useContext, useEffect, useRef, useState } from './preact-htm.js'
import { ApiError, api, command } from './api.js'
import { apiPath } from './routes.js'
import { Ctx, DomainPicker, ListState, Notice, Pager, errorText, grantableIn, domainName, homeDomain, splitPair, useCatalog, useConfirm, useFormAction, useLoad } from './ui.js'

/**
 * Creating a sub-role is its own action, confirmed, in the domain the list
 * shows (the API forces a merchant admin's own merchant, so only system
 * owners name it): pickers elsewhere offer only what exists.
 */
function CreateSubRole({ domain, onDone }) {
  const { t, me } = useContext(Ctx)
  const [ask, confirmation] = useConfirm()
  const where = me.principal_type === 'system_owner' ? domain : me.merchant_id
  const shownDomain = domainName(t, where)
  const [submit, notice, busy] = useFormAction(async (form) => {
    const code = form.get('code')
    const label = form.get('label')
    const scoped = me.principal_type === 'system_owner' ? { domain } : {}
    ask(t('confirmCreateSubRole', { code, label, domain: shownDomain }), async () => {
      const created = await api('POST', '/v2/admin/sub-roles', { body: command('create-sub-role', { code, label, ...scoped }) })
      onDone()
      return t('created', { code: created.code, domain: shownDomain })
    })
    return undefined
  })
  return html`<section aria-labelledby="create-role-heading">
    <h3 id="create-role-heading">${t('createSubRoleIn', { domain: shownDomain })}</h3>
    <form onSubmit=${submit} class="grid">
      <label for="role-code">${t('code')}</label>
      <input id="role-code" name="code" pattern="[a-z][a-z0-9_]{1,63}" required />
      <label for="role-label">${t('label')}</label>
      <input id="role-label" name="label" required />
      <button type="submit" disabled=${busy}>${t('createSubRole')}</button>
    </form>
    <${Notice} ...${notice} />
    ${confirmation}
  </section>`
}

/** What a cell of the matrix may be: the sub-role holds nothing of the pair, is granted it, or is denied it. */
const CELL_STATES = ['none', 'allow', 'deny']
/** The change of the bulk list that brings a cell to the state the admin marked. */
const KIND_FOR = { allow: 'role_grant', deny: 'role_deny', none: 'role_revoke' }

/**
 * A pair's cell as the API lists the sub-role: what it is now, and which
 * states it may be marked with. A deny is final here (no command lifts a
 * role's deny; a policy import does), and a grant made in `global` is not
 * taken back from a merchant's matrix (the revoke there would change nothing).
 */
function cellOf(granted, key, may) {
  const same = (p) => `${p.obj}:${p.act}` === key
  const denied = granted.denied.find(same)
  if (denied) return { state: 'deny', offered: ['deny'], note: 'cellDenyFixed' }
  const allows = granted.permissions.filter(same)
  const inherited = allows.some((p) => p.domain !== granted.domain)
  const state = allows.length > 0 ? 'allow' : 'none'
  const offered = [state]
  if (may.assign) offered.push(...(state === 'none' ? ['allow', 'deny'] : ['deny']))
  if (state === 'allow' && !inherited && may.revoke) offered.push('none')
  return { state, offered, note: inherited ? 'cellFromGlobal' : null }
}

/** A pair as people read it: its label and `obj:act`. */
const pairName = (labels, key) => (labels.has(key) ? `${labels.get(key)} (${key})` : key)

/** The dry run of the whole batch, in words: how many gain and lose access, and who gains and loses what. */
function BatchPreview({ preview, labels }) {
  const { t, lang } = useContext(Ctx)
  const list = (pairs) => new Intl.ListFormat(lang, { type: 'conjunction' }).format(pairs.map((p) => pairName(labels, `${p.obj}:${p.act}`)))
  const nobody = preview.users_gaining === 0 && preview.users_losing === 0
  return html`<div class="batch-preview">
    <p class="preview">
      ${nobody ? t('batchNobody') : `${t('batchGains', { count: preview.users_gaining })} ${t('batchLoses', { count: preview.users_losing })}`}
    </p>
    ${preview.sample.length > 0
      ? html`<ul>
          ${preview.sample.map(
            (s) => html`<li key=${s.user_id}>
              ${[s.gains.length > 0 ? t('userGains', { email: s.email, pairs: list(s.gains) }) : null, s.loses.length > 0 ? t('userLoses', { email: s.email, pairs: list(s.loses) }) : null]
                .filter((x) => x !== null)
                .join(' ')}
            </li>`,
          )}
        </ul>`
      : null}
  </div>`
}

/**
 * The permission matrix of a sub-role in a domain. Each pair is a cell of
 * three states (none, allow, deny); the admin marks several, previews the
 * whole batch once (the bulk endpoint's dry run: who gains and loses what),
 * then saves the same list in one call. A batch that takes access away asks
 * first. Space marks a cell and keeps the focus there, Tab goes on to the
 * batch's buttons, Escape drops the batch.
 */
function Matrix({ role, domain }) {
  const { t, me, can, lang } = useContext(Ctx)
  const catalog = useCatalog()
  const [marked, setMarked] = useState({})
  const [preview, setPreview] = useState(null)
  const [busy, setBusy] = useState(false)
  const [notice, setNotice] = useState({})
  const [ask, confirmation] = useConfirm()
  const lastCell = useRef(null)
  const scoped = me.principal_type === 'system_owner' ? { domain } : {}
  const [granted, error, reload] = useLoad(() => api('GET', apiPath`/v2/admin/permissions/roles/${role.code}`, { query: scoped }), [role.code, domain, lang])
  // A saved batch is shown at once, not only when the reload after it answers; the next load is the truth again.
  const [applied, setApplied] = useState({})
  useEffect(() => setApplied({}), [granted])
  if (catalog === null || granted === null) return html`<${Notice} error=${error} />`
  const labels = new Map(catalog.map((e) => [`${e.obj}:${e.act}`, e.label]))
  const may = { assign: !granted.is_root && can('permission:assign'), revoke: !granted.is_root && can('permission:revoke') }
  const changes = Object.entries(marked).map(([key, wanted]) => ({ kind: KIND_FOR[wanted], sub_role: role.code, ...splitPair(key), ...scoped }))
  const signature = JSON.stringify(changes)
  const previewed = preview !== null && preview.signature === signature ? preview.data : null

  const mark = (key, state, current, input) => {
    lastCell.current = input
    setNotice({})
    setMarked((now) => {
      const next = { ...now }
      if (state === current) delete next[key]
      else next[key] = state
      return next
    })
  }
  const cancel = () => {
    setMarked({})
    setPreview(null)
    // The focus goes back to the last cell marked, not to the page, whatever had it (the batch's buttons are gone).
    globalThis.requestAnimationFrame(() => lastCell.current?.closest('[role=radiogroup]')?.querySelector('input:checked')?.focus())
  }
  // A refusal names its change by its place in the list: shown by the pair instead.
  const refusal = (e) => {
    if (e instanceof ApiError) e.fields = e.fields.map((f) => ({ ...f, field: f.field.replace(/^changes\.(\d+)/, (_, i) => pairName(labels, `${changes[i]?.obj}:${changes[i]?.act}`)) }))
    return errorText(e)
  }
  const send = (dryRun) => api('POST', '/v2/admin/permissions/changes', { body: command('apply-permission-changes', { changes, ...(dryRun ? { dry_run: true } : {}) }) })
  const askPreview = async () => {
    setBusy(true)
    try {
      const answer = await send(true)
      setNotice({})
      setPreview({ signature, data: answer.preview })
    } catch (e) {
      setNotice({ error: refusal(e) })
    } finally {
      setBusy(false)
    }
  }
  const write = async () => {
    try {
      await send(false)
    } catch (e) {
      throw new Error(refusal(e))
    }
    setApplied(marked)
    setMarked({})
    setPreview(null)
    reload()
    return t('savedChanges', { count: changes.length })
  }
  const save = async () => {
    // A revoke or a deny, or anyone losing anything: asked first, naming the consequences.
    const removes = changes.some((c) => c.kind !== 'role_grant') || previewed.users_losing > 0
    if (removes) {
      const denies = changes.some((c) => c.kind === 'role_deny')
      const question = [
        t('confirmBatch', { count: changes.length, code: role.code, domain: domainName(t, granted.domain) }),
        t('batchLoses', { count: previewed.users_losing }),
        denies ? t('confirmDenyFinal') : null,
      ]
        .filter((x) => x !== null)
        .join(' ')
      ask(question, write)
      return
    }
    setBusy(true)
    try {
      setNotice({ status: await write() })
    } catch (e) {
      setNotice({ error: e.message })
    } finally {
      setBusy(false)
    }
  }
  const onKeyDown = (event) => {
    if (event.key === 'Escape' && Object.keys(marked).length > 0 && !busy) {
      event.preventDefault()
      cancel()
    }
  }

  const groups = new Map()
  for (const entry of grantableIn(catalog, granted.domain)) groups.set(entry.group_name, [...(groups.get(entry.group_name) ?? []), entry])
  const count = changes.length
  return html`<section aria-labelledby="matrix-heading" onKeyDown=${onKeyDown}>
    <h3 id="matrix-heading">${t('matrix', { code: role.code, domain: domainName(t, granted.domain) })}</h3>
    ${granted.is_root ? html`<p>${t('rootHoldsAll')}</p>` : html`<p class="muted">${t('matrixHelp')}</p>`}
    <${Notice} ...${notice} />
    <div class="matrix">
      ${[...groups].map(
        ([group, entries]) => html`<fieldset key=${group}>
          <legend>${group}</legend>
          ${entries.map((entry) => {
            const key = `${entry.obj}:${entry.act}`
            const id = `cell-${key.replace(/[^a-z0-9]/gi, '-')}`
            const cell = granted.is_root ? { state: 'allow', offered: [], note: null } : cellOf(granted, key, may)
            const shown = marked[key] ?? applied[key] ?? cell.state
            return html`<div class="cell" key=${key} role="radiogroup" aria-labelledby=${`${id}-name`} aria-describedby=${cell.note ? `${id}-note` : undefined} data-pair=${key} data-state=${shown}>
              <span class="cell-name" id=${`${id}-name`}>${entry.label} <code>${key}</code></span>
              <span class="cell-states">
                ${CELL_STATES.map(
                  (state) => html`<label key=${state} class=${`state-${state}`}>
                    <input
                      type="radio"
                      name=${id}
                      value=${state}
                      checked=${shown === state}
                      disabled=${!cell.offered.includes(state)}
                      onChange=${(e) => mark(key, state, cell.state, e.currentTarget)}
                    />
                    ${t(`cell_${state}`)}
                  </label>`,
                )}
              </span>
              ${key in marked ? html`<span class="tag">${t('cellMarked')}</span>` : null}
              ${cell.note ? html`<span class="muted" id=${`${id}-note`}>${t(cell.note)}</span>` : null}
            </div>`
          })}
        </fieldset>`,
      )}
    </div>
    ${count > 0
      ? html`<div class="panel pending" role="region" aria-label=${t('batchPending', { count })}>
          <p class="preview">${t('batchPending', { count })}</p>
          <ul>
            ${changes.map((c) => html`<li key=${`${c.obj}:${c.act}`}>${t(`mark_${c.kind}`, { pair: pairName(labels, `${c.obj}:${c.act}`) })}</li>`)}
          </ul>
          ${previewed ? html`<${BatchPreview} preview=${previewed} labels=${labels} />` : null}
          ${previewed
            ? html`<button type="button" class="primary" disabled=${busy} onClick=${save}>${t('save')}</button>`
            : html`<button type="button" class="primary" disabled=${busy} onClick=${askPreview}>${t('previewBatch')}</button>`}
          <button type="button" disabled=${busy} onClick=${cancel}>${t('cancel')}</button>
        </div>`
      : null}
    ${confirmation}
  </section>`
}

export function SubRolesScreen() {
  const { t, me, can, lang } = useContext(Ctx)
  const [domain, setDomain] = useState(homeDomain(me))
  const [page, setPage] = useState(1)
  const [selected, setSelected] = useState(null)
  const [data, error, reload, loading] = useLoad(() => api('GET', '/v2/admin/sub-roles', { query: { domain: me.principal_type === 'system_owner' ? domain : undefined, page } }), [domain, page, lang])
  return html`<section>
    <h2>${t('subRoles')}</h2>
    <${DomainPicker} id="roles-domain" value=${domain} onChange=${(d) => { setDomain(d); setSelected(null); setPage(1) }} />
    <${Notice} error=${error} />
    <${ListState} loading=${loading} data=${data} empty=${t('noSubRoles')} />
    ${data && data.items.length > 0
      ? html`<table>
          <thead><tr><th>${t('code')}</th><th>${t('label')}</th><th>${t('members')}</th><th>${t('rules')}</th><th>${t('permissions')}</th></tr></thead>
          <tbody>
            ${data.items.map(
              (r) => html`<tr key=${r.code}>
                <td>${r.code}${r.is_root ? html` <span class="tag">${t('root')}</span>` : null}</td>
                <td>${r.label ?? ''}</td>
                <td>${r.members}</td>
                <td>${r.rules}</td>
                <td><button type="button" aria-pressed=${selected?.code === r.code} aria-label=${`${t('permissions')}: ${r.code}`} onClick=${() => setSelected(r)}>${t('permissions')}</button></td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
    <${Pager} page=${data} onPage=${setPage} />
    ${selected ? html`<${Matrix} key=${`${selected.code}@${domain}`} role=${selected} domain=${domain} />` : html`<p>${t('chooseSubRole')}</p>`}
    ${can('permission:assign') ? html`<${CreateSubRole} domain=${domain} onDone=${reload} />` : null}
  </section>`
}
