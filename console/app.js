// The admin console: Preact components written with htm's tagged templates,
// so the browser runs this file as it is (no build step).
import { html, render, useContext, useEffect, useState } from './preact-htm.js'
import { ApiError, SESSION_ENDED, api, command, session, setApiLanguage } from './api.js'
import { browserLanguage, translator } from './i18n.js'
import { Ctx, LanguageSwitch, Notice, errorText, useFormAction } from './ui.js'
import { AccountsScreen, UserScreen } from './accounts.js'
import { SubRolesScreen } from './subRoles.js'
import { AuditScreen, MerchantsScreen, ReviewScreen } from './lists.js'
import { readRoute } from './routes.js'
import { DecisionsScreen } from './decisions.js'
import { ShadowScreen } from './shadow.js'

const LANGUAGE_KEY = 'aps.console.language'

function SignIn({ onSignedIn, ended }) {
  const { t } = useContext(Ctx)
  const [error, setError] = useState(null)
  const submit = async (event) => {
    event.preventDefault()
    const form = new FormData(event.currentTarget)
    try {
      const data = await api('POST', '/v2/auth/login', { body: { command: 'login', data: { email: form.get('email'), password: form.get('password') } } })
      session.token = data.access_token
      setError(null)
      await onSignedIn()
    } catch (e) {
      setError(errorText(e))
    }
  }
  return html`<main class="sign-in">
    <h1>${t('title')}</h1>
    <${LanguageSwitch} />
    ${ended ? html`<p class="error" role="alert">${t('sessionEnded')}</p>` : null}
    <form onSubmit=${submit} aria-label=${t('signIn')}>
      <label for="login-email">${t('email')}</label>
      <input id="login-email" name="email" type="email" autocomplete="username" required />
      <label for="login-password">${t('password')}</label>
      <input id="login-password" name="password" type="password" autocomplete="current-password" required />
      <button type="submit">${t('signIn')}</button>
      <${Notice} error=${error} />
    </form>
  </main>`
}

function PasswordScreen({ onChanged }) {
  const { t } = useContext(Ctx)
  const [submit, notice] = useFormAction(async (form) => {
    const data = await api('POST', '/v2/profile/password', {
      body: { command: 'change-password', data: { current_password: form.get('current'), new_password: form.get('next') } },
    })
    // Tokens issued before the change are refused from now on: keep the fresh one.
    if (data?.access_token) session.token = data.access_token
    onChanged()
    return t('passwordChanged')
  })
  return html`<section>
    <h2>${t('changePassword')}</h2>
    <form onSubmit=${submit} class="stack">
      <label for="pw-current">${t('currentPassword')}</label>
      <input id="pw-current" name="current" type="password" autocomplete="current-password" required />
      <label for="pw-next">${t('newPassword')}</label>
      <input id="pw-next" name="next" type="password" autocomplete="new-password" minlength="8" required />
      <button type="submit">${t('changePassword')}</button>
    </form>
    <${Notice} ...${notice} />
  </section>`
}

/**
 * An account signing in with a generated password (the first start's, or
 * one `password reset` printed) chooses its own before anything else: that
 * password has been on a terminal and maybe in a ticket or a chat.
 */
function ForcedPassword({ onChanged, onSignOut }) {
  const { t, me } = useContext(Ctx)
  return html`<main class="sign-in">
    <h1>${t('title')}</h1>
    <${LanguageSwitch} />
    <p class="who">${t('signedInAs', { email: me.email })}</p>
    <p role="status">${t('mustChangePassword')}</p>
    <${PasswordScreen} onChanged=${onChanged} />
    <button type="button" onClick=${onSignOut}>${t('signOut')}</button>
  </main>`
}

function Shell({ route, onSignOut, reloadMe }) {
  const { t, me, can } = useContext(Ctx)
  const sections = [
    ['accounts', t('accounts'), can('admin:read')],
    ['sub-roles', t('subRoles'), can('permission:read')],
    ['review', t('review'), can('permission:read')],
    ['audit', t('audit'), can('permission:read')],
    ['merchants', t('merchants'), me.principal_type === 'system_owner' && can('merchant:onboard')],
    ['decisions', t('decisions'), can('permission:read')],
    ['shadow', t('shadow'), me.principal_type === 'system_owner' && can('permission:read')],
  ].filter(([, , shown]) => shown)
  // A section the admin may not open (a typed or old link) shows its first one instead.
  const fallback = sections[0]?.[0] ?? 'password'
  const asked = route.section ?? fallback
  const { id } = route
  const first = ['users', 'password'].includes(asked) || sections.some(([key]) => key === asked) ? asked : fallback
  let screen
  if (first === 'accounts') screen = html`<${AccountsScreen} merchant=${me.principal_type === 'system_owner' ? id : null} />`
  else if (first === 'users' && id !== null) screen = html`<${UserScreen} userId=${id} />`
  else if (first === 'users') screen = html`<p role="alert">${t('unknownLink')}</p>`
  else if (first === 'sub-roles') screen = html`<${SubRolesScreen} />`
  else if (first === 'review') screen = html`<${ReviewScreen} />`
  else if (first === 'audit') screen = html`<${AuditScreen} />`
  else if (first === 'merchants') screen = html`<${MerchantsScreen} />`
  else if (first === 'decisions') screen = html`<${DecisionsScreen} />`
  else if (first === 'shadow') screen = html`<${ShadowScreen} />`
  else screen = html`<${PasswordScreen} onChanged=${reloadMe} />`
  return html`<div class="shell">
    <header>
      <h1>${t('title')}</h1>
      <p class="who">${t('signedInAs', { email: me.email })}${me.merchant_id ? ` · ${me.merchant_id}` : ''} · ${me.sub_role_code}</p>
      <${LanguageSwitch} />
      <a href="#/password">${t('changePassword')}</a>
      <button type="button" onClick=${onSignOut}>${t('signOut')}</button>
    </header>
    <nav aria-label=${t('nav')}>
      <ul>
        ${sections.map(([key, name]) => html`<li><a href=${`#/${key}`} aria-current=${first === key ? 'page' : undefined}>${name}</a></li>`)}
      </ul>
    </nav>
    <main key=${`${route.section}/${route.id}`}>${screen}</main>
  </div>`
}

function App() {
  const [lang, setLangState] = useState(() => sessionStorage.getItem(LANGUAGE_KEY) ?? browserLanguage())
  const [me, setMe] = useState(null)
  const [held, setHeld] = useState(new Set())
  const [ready, setReady] = useState(false)
  const [route, setRoute] = useState(() => readRoute(location.hash))
  // The token was refused (expired, ended elsewhere): sign in again and come back to the same screen (the address keeps it).
  const [ended, setEnded] = useState(false)
  setApiLanguage(lang)
  const t = translator(lang)

  const loadMe = async () => {
    if (session.token === null) {
      setMe(null)
      setReady(true)
      return
    }
    try {
      const [account, permissions] = await Promise.all([api('GET', '/v2/profile'), api('GET', '/v2/profile/permissions')])
      setMe(account)
      setHeld(new Set(permissions.is_root ? ['*'] : permissions.permissions.map((p) => `${p.obj}:${p.act}`)))
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) session.token = null
      setMe(null)
    }
    setReady(true)
  }
  useEffect(() => {
    void loadMe()
    const onHash = () => setRoute(readRoute(location.hash))
    const onEnded = () => {
      setEnded(true)
      setMe(null)
    }
    addEventListener('hashchange', onHash)
    addEventListener(SESSION_ENDED, onEnded)
    return () => {
      removeEventListener('hashchange', onHash)
      removeEventListener(SESSION_ENDED, onEnded)
    }
  }, [])
  useEffect(() => {
    document.documentElement.lang = lang
    document.title = t('title')
  }, [lang])

  const setLang = (value) => {
    sessionStorage.setItem(LANGUAGE_KEY, value)
    setLangState(value)
  }
  // The token is ended on the server first (on every replica), so a copy of it left anywhere stops working;
  // it is forgotten here whatever the answer (already ended, expired or the server out of reach).
  const signOut = async () => {
    try {
      await api('POST', '/v2/auth/logout', { body: command('logout', {}) })
    } catch {
      // Nothing more to do here: the tab forgets the token below.
    }
    session.token = null
    setMe(null)
    setEnded(false)
    location.hash = ''
  }
  const can = (permission) => held.has('*') || held.has(permission)
  const value = { t, lang, setLang, me, can }
  if (!ready) return html`<p>${t('loading')}</p>`
  return html`<${Ctx.Provider} value=${value}>
    ${me === null
      ? html`<${SignIn} ended=${ended} onSignedIn=${async () => { setEnded(false); await loadMe() }} />`
      : me.must_change_password
        ? html`<${ForcedPassword} onChanged=${loadMe} onSignOut=${signOut} />`
        : html`<${Shell} route=${route} onSignOut=${signOut} reloadMe=${loadMe} />`}
  </${Ctx.Provider}>`
}

const root = document.getElementById('root')
root.textContent = ''
render(html`<${App} />`, root)
