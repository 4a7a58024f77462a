// Sub-roles: the list in a domain, creation with a label, and the permission
// matrix where each grant or revoke is previewed (dry run) before it is saved.
import { html, useContext, useEffect, useState } from './preact-htm.js'
import { api, command } from './api.js'
import { apiPath } from './routes.js'
import { Ctx, DomainPicker, Notice, Pager, errorText, grantableIn, domainName, homeDomain, useCatalog, useConfirm, useFormAction, useLoad } from './ui.js'

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

/** One pending change: what the dry run said, waiting for Save or Cancel. */
function Preview({ pending, onSave, onCancel }) {
  const { t } = useContext(Ctx)
  const pair = `${pending.entry.obj}:${pending.entry.act}`
  const text =
    pending.action === 'grant'
      ? t('previewGrant', { count: pending.preview.users_gaining, pair })
      : t('previewRevoke', { count: pending.preview.users_losing, pair })
  return html`<div class="panel" role="region" aria-label=${text}>
    <p class="preview">${text}</p>
    ${pending.preview.sample.length > 0 ? html`<ul>${pending.preview.sample.map((s) => html`<li key=${s.user_id}>${s.email}</li>`)}</ul>` : null}
    <button type="button" onClick=${onSave}>${t('save')}</button>
    <button type="button" onClick=${onCancel}>${t('cancel')}</button>
  </div>`
}

function Matrix({ role, domain }) {
  const { t, me, can, lang } = useContext(Ctx)
  const catalog = useCatalog()
  const [pending, setPending] = useState(null)
  const [notice, setNotice] = useState({})
  const scoped = me.principal_type === 'system_owner' ? { domain } : {}
  const [granted, error, reload] = useLoad(() => api('GET', apiPath`/v2/admin/permissions/roles/${role.code}`, { query: scoped }), [role.code, domain, lang])
  // A saved change is shown at once, not only when the reload after it answers; the next load is the truth again.
  const [applied, setApplied] = useState({})
  useEffect(() => setApplied({}), [granted])
  if (catalog === null || granted === null) return html`<${Notice} error=${error} />`
  const holds = new Set(granted.permissions.map((p) => `${p.obj}:${p.act}`))
  const writes = (action) => (action === 'grant' ? ['POST', 'grant', 'grant-role-permission'] : ['DELETE', 'revoke', 'revoke-role-permission'])
  const call = (action, entry, dryRun) => {
    const [method, path, name] = writes(action)
    return api(method, apiPath`/v2/admin/permissions/roles/${role.code}/${path}`, {
      body: command(name, { obj: entry.obj, act: entry.act, ...scoped, ...(dryRun ? { dry_run: true } : {}) }),
    })
  }
  const toggle = async (entry, checked) => {
    const action = checked ? 'grant' : 'revoke'
    try {
      const answer = await call(action, entry, true)
      setNotice({})
      setPending({ action, entry, preview: answer.preview })
    } catch (e) {
      setNotice({ error: errorText(e) })
    }
  }
  const save = async () => {
    try {
      await call(pending.action, pending.entry, false)
      setApplied((shown) => ({ ...shown, [`${pending.entry.obj}:${pending.entry.act}`]: pending.action === 'grant' }))
      setPending(null)
      setNotice({ status: t('saved') })
      reload()
    } catch (e) {
      setNotice({ error: errorText(e) })
    }
  }
  const editable = !granted.is_root && (can('permission:assign') || can('permission:revoke'))
  const groups = new Map()
  for (const entry of grantableIn(catalog, granted.domain)) groups.set(entry.group_name, [...(groups.get(entry.group_name) ?? []), entry])
  return html`<section aria-labelledby="matrix-heading">
    <h3 id="matrix-heading">${t('matrix', { code: role.code, domain: domainName(t, granted.domain) })}</h3>
    ${granted.is_root ? html`<p>${t('rootHoldsAll')}</p>` : null}
    <${Notice} ...${notice} />
    ${pending ? html`<${Preview} pending=${pending} onSave=${save} onCancel=${() => setPending(null)} />` : null}
    <div class="matrix">
      ${[...groups].map(
        ([group, entries]) => html`<fieldset key=${group}>
          <legend>${group}</legend>
          ${entries.map((entry) => {
            const key = `${entry.obj}:${entry.act}`
            const id = `perm-${key.replace(/[^a-z0-9]/gi, '-')}`
            const shown = pending && `${pending.entry.obj}:${pending.entry.act}` === key ? pending.action === 'grant' : key in applied ? applied[key] : holds.has(key)
            return html`<div class="check" key=${key}>
              <input
                type="checkbox"
                id=${id}
                checked=${shown}
                disabled=${!editable || pending !== null}
                onChange=${(e) => toggle(entry, e.currentTarget.checked)}
              />
              <label for=${id}>${entry.label} <code>${key}</code></label>
            </div>`
          })}
        </fieldset>`,
      )}
    </div>
  </section>`
}

export function SubRolesScreen() {
  const { t, me, can, lang } = useContext(Ctx)
  const [domain, setDomain] = useState(homeDomain(me))
  const [page, setPage] = useState(1)
  const [selected, setSelected] = useState(null)
  const [data, error, reload] = useLoad(() => api('GET', '/v2/admin/sub-roles', { query: { domain: me.principal_type === 'system_owner' ? domain : undefined, page } }), [domain, page, lang])
  return html`<section>
    <h2>${t('subRoles')}</h2>
    <${DomainPicker} id="roles-domain" value=${domain} onChange=${(d) => { setDomain(d); setSelected(null); setPage(1) }} />
    <${Notice} error=${error} />
    ${data
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
