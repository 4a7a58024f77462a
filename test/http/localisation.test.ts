import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { errorTable } from '../../src/domain/errors.js'
import { createLocalizer, errorTexts } from '../../src/i18n/index.js'
import { TEST_SECRET, buildTestApp, freshDatabase, onboard, type TestApp } from '../helper.js'
import { nowSeconds, sign } from '../support/jwt.js'
import { onceOnPGlite } from '../support/onceOnPGlite.js'

onceOnPGlite('locale negotiation and texts')

/** Localisation: lang > Accept-Language > DEFAULT_LOCALE; unknown locales fall through. */

interface Messages {
  errors: Record<string, string>
  validation: Record<string, string>
}
const i18nDir = new URL('../../src/i18n/', import.meta.url)
const messages = (locale: string) => JSON.parse(readFileSync(new URL(`${locale}.json`, i18nDir), 'utf8')) as Messages
const en = messages('en')
const es = messages('es')
const errorText = (m: Messages, key: string): string => {
  const text = m.errors[key]
  if (text === undefined) throw new Error(`no message errors.${key}`)
  return text
}
const EN = errorText(en, 'UNAUTHENTICATED')
const ES = errorText(es, 'UNAUTHENTICATED')

t.test('the messages themselves', async (t) => {
  t.equal(ES, 'Se requiere un token de acceso: envíe Authorization: Bearer <token>.', 'the Spanish file is Spanish')
  t.same(Object.keys(es.errors).sort(), Object.keys(en.errors).sort(), 'every error has a Spanish text')
  t.same(Object.keys(es.validation).sort(), Object.keys(en.validation).sort(), 'every validation message has a Spanish text')
  for (const key of Object.keys(en.errors)) t.not(es.errors[key], en.errors[key], `errors.${key} is translated`)
})

t.test('every locale file holds a text for exactly the codes of the error table', async (t) => {
  const texts = errorTexts()
  t.same(Object.keys(texts).sort(), ['en', 'es'], 'the locale files found')
  const codes = Object.keys(errorTable).sort()
  for (const [locale, errors] of Object.entries(texts)) {
    t.same(Object.keys(errors).sort(), codes, `${locale}.json: errors.<code> for every code of src/domain/errors.ts and no other`)
    for (const [code, text] of Object.entries(errors)) t.ok(typeof text === 'string' && text !== '', `${locale}.json: errors.${code} is a text`)
  }
})

t.test('the locale of responses and errors', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const text = async (app: TestApp, query: string, headers: Record<string, string> = {}) =>
    (await app.call({ method: 'GET', url: `/v2/profile${query}`, token: null, headers })).json().response_text as string

  t.test('order: lang, then Accept-Language, then the default', async (t) => {
    const cases: Array<[string, string, Record<string, string>, string]> = [
      ['nothing sent: DEFAULT_LOCALE (en)', '', {}, EN],
      ['Accept-Language es', '', { 'accept-language': 'es' }, ES],
      ['Accept-Language en', '', { 'accept-language': 'en' }, EN],
      ['lang=es', '?lang=es', {}, ES],
      ['lang=en', '?lang=en', {}, EN],
      ['lang=en beats Accept-Language es', '?lang=en', { 'accept-language': 'es' }, EN],
      ['lang=es beats Accept-Language en', '?lang=es', { 'accept-language': 'en' }, ES],
      ['q-values: es ranked above en', '', { 'accept-language': 'en;q=0.1, es;q=0.9' }, ES],
      ['q-values: en ranked above es', '', { 'accept-language': 'es;q=0.2, en;q=0.8' }, EN],
      ['an unsupported first choice is skipped', '', { 'accept-language': 'fr, es;q=0.5' }, ES],
      ['several unsupported choices are skipped', '', { 'accept-language': 'fr-FR, de;q=0.9, es;q=0.5, en;q=0.4' }, ES],
      ['a region tag resolves to its language', '', { 'accept-language': 'es-MX' }, ES],
      ['a region tag with q-values', '', { 'accept-language': 'en-US;q=0.3, es-AR;q=0.7' }, ES],
      ['lang with a region', '?lang=es-MX', {}, ES],
      ['lang in capitals', '?lang=ES', {}, ES],
      ['an unknown lang falls through to Accept-Language', '?lang=xx', { 'accept-language': 'es' }, ES],
      ['an unknown lang falls through to the default', '?lang=xx', {}, EN],
      ['an empty lang falls through', '?lang=', { 'accept-language': 'es' }, ES],
      ['only unsupported locales: the default', '', { 'accept-language': 'fr, de' }, EN],
      ['q=0 means not acceptable', '', { 'accept-language': 'es;q=0' }, EN],
      ['a wildcard: the default', '', { 'accept-language': '*' }, EN],
      ['a malformed header: the default', '', { 'accept-language': ';;;,,=q' }, EN],
    ]
    for (const [name, query, headers, expected] of cases) t.equal(await text(ta, query, headers), expected, name)
  })

  t.test('DEFAULT_LOCALE', async (t) => {
    const spanish = await buildTestApp(t, { db, env: { DEFAULT_LOCALE: 'es' } })
    t.equal(await text(spanish, ''), ES, 'nothing sent: the configured default')
    t.equal(await text(spanish, '', { 'accept-language': 'en' }), EN, 'Accept-Language beats it')
    t.equal(await text(spanish, '?lang=en'), EN, 'lang beats it')
    t.equal(await text(spanish, '?lang=xx'), ES, 'an unknown lang falls back to it')
    t.equal(await text(spanish, '', { 'accept-language': 'fr' }), ES, 'an unsupported Accept-Language falls back to it')
    t.equal(await text(ta, ''), EN, 'the other app keeps its own default')
    const validation = await spanish.call({ method: 'POST', url: '/v2/admin/register', body: { command: 'register-admin', data: {} } })
    t.equal(validation.json().response_text, es.errors.VALIDATION_FAILED)
  })

  t.test('validation errors are localised; field names stay as sent', async (t) => {
    const body = { command: 'register-admin', data: { email: 'bad', password: 'short', name: 'A', sub_role_code: 'Bad Code', extra_field: 1 } }
    const res = await ta.call({ method: 'POST', url: '/v2/admin/register?lang=es', body })
    t.equal(res.statusCode, 400)
    t.equal(res.json().response_text, 'La solicitud no es válida.')
    t.same(
      [...(res.json().errors as Array<{ field: string; message: string }>)].sort((a, b) => a.field.localeCompare(b.field)),
      [
        { field: 'email', message: 'debe ser una dirección de correo electrónico válida' },
        { field: 'extra_field', message: 'no es un campo conocido' },
        { field: 'password', message: 'debe tener al menos 8 caracteres' },
        { field: 'sub_role_code', message: 'contiene caracteres no permitidos' },
      ],
    )
    const english = await ta.call({ method: 'POST', url: '/v2/admin/register', body, headers: { 'accept-language': 'en' } })
    t.same(
      [...(english.json().errors as Array<{ field: string; message: string }>)].sort((a, b) => a.field.localeCompare(b.field)),
      [
        { field: 'email', message: 'must be a valid e-mail address' },
        { field: 'extra_field', message: 'is not a known field' },
        { field: 'password', message: 'must be at least 8 characters long' },
        { field: 'sub_role_code', message: 'contains characters that are not allowed' },
      ],
    )
    const query = await ta.call({ method: 'GET', url: '/v2/admin/permissions/audit-log?page_size=500', headers: { 'accept-language': 'es' } })
    t.same(query.json().errors, [{ field: 'page_size', message: 'debe ser como máximo 100' }], 'query parameters too')
    const typed = await ta.call({ method: 'POST', url: '/v2/admin/register?lang=es', body: { command: 'register-admin', data: { ...body.data, email: 5, extra_field: undefined } } })
    t.ok((typed.json().errors as Array<{ field: string; message: string }>).some((e) => e.field === 'email' && e.message === 'debe ser de tipo string'))
  })

  t.test('authentication and other errors are localised too', async (t) => {
    const expired = sign({ sub: ta.root.id, principal_type: 'system_owner', exp: nowSeconds() - 60 }, TEST_SECRET)
    const owner = await onboard(ta, 'm1')
    const cases: Array<[string, Parameters<TestApp['call']>[0], string]> = [
      ['no token', { method: 'GET', url: '/v2/profile', token: null }, 'UNAUTHENTICATED'],
      ['a bad token', { method: 'GET', url: '/v2/profile', token: 'nope' }, 'INVALID_TOKEN'],
      ['an expired token', { method: 'GET', url: '/v2/profile', token: expired }, 'TOKEN_EXPIRED'],
      ['wrong credentials', { method: 'POST', url: '/v2/auth/login', token: null, body: { command: 'login', data: { email: 'x@example.com', password: 'whatever-1' } } }, 'BAD_CREDENTIALS'],
      ['malformed JSON', { method: 'POST', url: '/v2/admin/register', body: '{' }, 'MALFORMED_BODY'],
      ['wrong content type', { method: 'POST', url: '/v2/admin/register', body: 'x', headers: { 'content-type': 'text/plain' } }, 'UNSUPPORTED_MEDIA_TYPE'],
      ['super_admin', { method: 'POST', url: '/v2/admin/register', body: { command: 'register-admin', data: { email: 'sa@x.example', password: 'long-enough', name: 'S', sub_role_code: 'super_admin' } } }, 'ROOT_ROLE_NOT_REGISTRABLE'],
      ['duplicate e-mail', { method: 'POST', url: '/v2/admin/register', body: { command: 'register-admin', data: { email: 'ROOT@example.com', password: 'long-enough', name: 'S', sub_role_code: 'clerk' } } }, 'EMAIL_TAKEN'],
      ['merchant caller onboarding', { method: 'POST', url: '/v2/admin/merchants', token: ta.tokenFor(owner), body: { command: 'onboard-merchant', data: { merchant_id: 'm9', email: 'o@m9.example', password: 'long-enough', name: 'O' } } }, 'PRINCIPAL_TYPE_DENIED'],
    ]
    for (const [name, request, key] of cases) {
      const english = await ta.call(request)
      const spanish = await ta.call({ ...request, url: `${request.url}?lang=es` })
      t.equal(spanish.statusCode, english.statusCode, `${name}: the same status in both`)
      t.equal(spanish.json().response_code, english.json().response_code, `${name}: the same code in both`)
      const params = /\{\{/.test(en.errors[key] ?? '')
      if (params) {
        t.not(spanish.json().response_text, english.json().response_text, `${name}: Spanish differs`)
        t.notMatch(spanish.json().response_text, /\{\{/, `${name}: parameters filled in`)
        t.match(spanish.json().response_text, new RegExp(`^${(es.errors[key] ?? '').split('{{')[0]}`), `${name}: the Spanish text`)
      } else {
        t.equal(english.json().response_text, en.errors[key], `${name}: English`)
        t.equal(spanish.json().response_text, es.errors[key], `${name}: Spanish`)
      }
    }
    const notFound = await ta.call({ method: 'GET', url: '/v2/nowhere?lang=es' })
    t.equal(notFound.json().response_text, 'No existe el endpoint GET /v2/nowhere.')
  })

  t.test('overlapping requests each get their own locale', async (t) => {
    const invalid = { command: 'register-admin', data: { email: 'bad', password: 'long-enough', name: 'A', sub_role_code: 'clerk' } }
    const requests = Array.from({ length: 50 }, (_, i) => {
      const locale = i % 2 === 0 ? 'es' : 'en'
      const byQuery = i % 4 < 2
      const kind = i % 3 === 0 ? 'auth' : i % 3 === 1 ? 'validation' : 'not-found'
      const url = kind === 'auth' ? '/v2/profile' : kind === 'validation' ? '/v2/admin/register' : '/v2/missing'
      return ta
        .call({
          method: kind === 'validation' ? 'POST' : 'GET',
          url: `${url}${byQuery ? `?lang=${locale}` : ''}`,
          token: kind === 'auth' ? null : ta.rootToken,
          headers: byQuery ? { 'accept-language': locale === 'es' ? 'en' : 'es;q=0.1' } : { 'accept-language': locale },
          ...(kind === 'validation' ? { body: invalid } : {}),
        })
        .then((res) => ({ i, locale, kind, body: res.json() as { response_text: string; errors?: Array<{ message: string }> } }))
    })
    const answers = await Promise.all(requests)
    const expected = (locale: string, kind: string) => {
      const m = locale === 'es' ? es : en
      if (kind === 'auth') return m.errors.UNAUTHENTICATED
      if (kind === 'validation') return m.errors.VALIDATION_FAILED
      return (m.errors.ROUTE_NOT_FOUND ?? '').replace('{{method}}', 'GET').replace('{{url}}', '/v2/missing')
    }
    const wrong = answers.filter((a) => a.body.response_text !== expected(a.locale, a.kind))
    t.same(wrong, [], 'every answer is in the locale its request asked for')
    const wrongFields = answers.filter(
      (a) => a.kind === 'validation' && a.body.errors?.[0]?.message !== (a.locale === 'es' ? es : en).validation.format_email,
    )
    t.same(wrongFields, [], 'field messages too')
    t.equal(answers.filter((a) => a.locale === 'es').length, 25)
    t.ok(new Set(answers.map((a) => a.kind)).size === 3, 'all three kinds of answer were exercised')
  })
})

t.test('adding a locale is adding one file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'aps-i18n-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'en.json'), JSON.stringify(en))
  writeFileSync(join(dir, 'es.json'), JSON.stringify(es))
  const fr: Messages = { errors: { ...en.errors, UNAUTHENTICATED: 'Un jeton est requis.' }, validation: en.validation }
  writeFileSync(join(dir, 'fr.json'), JSON.stringify(fr))
  const localizer = createLocalizer('en', dir)
  t.same([...localizer.locales].sort(), ['en', 'es', 'fr'])
  t.equal(localizer.negotiate(undefined, 'fr-CA, en;q=0.5'), 'fr')
  t.equal(localizer.translator('fr')('errors.UNAUTHENTICATED'), 'Un jeton est requis.')
  t.equal(localizer.negotiate('fr', 'es'), 'fr')
  t.equal(createLocalizer('en').negotiate(undefined, 'fr-CA, en;q=0.5'), 'en', 'the shipped set has no French')
  t.equal(createLocalizer('xx').defaultLocale, 'en', 'an unknown default falls back to English')
})
