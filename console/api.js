// The public REST API, as any client calls it. The token lives in this tab's
// sessionStorage only: closing the tab signs out, and no other tab, page or
// cookie sees it.
const TOKEN_KEY = 'aps.console.token'

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.response_text ?? `HTTP ${status}`)
    this.status = status
    this.code = body?.response_code ?? null
    this.fields = body?.errors ?? []
  }
}

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY)
  },
  set token(value) {
    if (value === null) sessionStorage.removeItem(TOKEN_KEY)
    else sessionStorage.setItem(TOKEN_KEY, value)
  },
}

/** The window event sent when the API refuses the token (401). */
export const SESSION_ENDED = 'aps:session-ended'

let language = 'en'
export const setApiLanguage = (lang) => {
  language = lang
}
/** The language the console asks the API to answer in. */
export const apiLanguage = () => language

/** Calls the API; answers the envelope's `data`, or throws an ApiError with the API's own (localised) text. */
export async function api(method, path, { query, body } = {}) {
  const url = new URL(path, location.origin)
  // Only the path as written (values in it encoded by apiPath): nothing the browser resolves (`..`, `\`) into another route.
  if (url.origin !== location.origin || url.pathname !== path || url.search !== '') throw new Error(`not an API path: ${path}`)
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, String(value))
  }
  const headers = { accept: 'application/json', 'accept-language': language }
  if (session.token !== null) headers.authorization = `Bearer ${session.token}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const json = await response.json().catch(() => null)
  if (!response.ok) {
    // An expired, ended or otherwise refused token: the console asks for a new sign-in instead of showing a dead screen.
    if (response.status === 401 && path !== '/v2/auth/login' && session.token !== null) {
      session.token = null
      globalThis.dispatchEvent(new globalThis.Event(SESSION_ENDED))
    }
    throw new ApiError(response.status, json)
  }
  return json?.data
}

/** A command body, `{ command, data }`, as every write takes it. */
export const command = (name, data) => ({ command: name, data })
