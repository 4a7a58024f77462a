// The shadow model (SHADOW_MODEL_PATH): how often it was asked, where it
// would have answered otherwise, with the first decisions of each pair.
// System owners only, as the API answers it to them only.
import { html, useContext } from './preact-htm.js'
import { api } from './api.js'
import { Ctx, Notice, useLoad } from './ui.js'

export function ShadowScreen() {
  const { t, lang } = useContext(Ctx)
  const [data, error, reload] = useLoad(() => api('GET', '/v2/admin/model/shadow'), [lang])
  if (data === null) return html`<section><h2>${t('shadow')}</h2><${Notice} error=${error} /></section>`
  return html`<section>
    <h2>${t('shadow')}</h2>
    <p role="status">${data.enabled ? t('shadowEnabled') : t('shadowDisabled', { reason: data.reason ?? '' })}</p>
    ${data.model_id !== null
      ? html`<dl class="grid">
          <dt>${t('shadowModel')}</dt><dd><code>${data.model_id}</code></dd>
          <dt>${t('shadowSample')}</dt><dd>${`${Math.round((data.sample ?? 0) * 100)} %`}</dd>
          <dt>${t('shadowSince')}</dt><dd>${new Date(data.since).toLocaleString(lang)}</dd>
          <dt>${t('shadowCompared')}</dt><dd>${data.compared}</dd>
        </dl>`
      : null}
    <button type="button" onClick=${reload}>${t('shadowRefresh')}</button>
    <h3>${t('shadowDisagreements')}</h3>
    ${data.disagreements.length === 0
      ? html`<p>${t('shadowNone')}</p>`
      : html`<table>
          <thead><tr><th>${t('permission')}</th><th>${t('shadowCount')}</th><th>${t('shadowDecisionIds')}</th></tr></thead>
          <tbody>
            ${data.disagreements.map(
              (d) => html`<tr key=${`${d.obj}:${d.act}`}>
                <td>${d.obj}:${d.act}</td>
                <td>${d.count}</td>
                <td>${d.decision_ids.map((id) => html`<code key=${id}>${id}</code> `)}</td>
              </tr>`,
            )}
          </tbody>
        </table>`}
  </section>`
}
