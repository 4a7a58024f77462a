import t from 'tap'
import { buildTestApp, freshDatabase } from '../helper.js'

const EN = 'An access token is required: send Authorization: Bearer <token>.'
const ES = 'Se requiere un token de acceso: envíe Authorization: Bearer <token>.'

t.test('the locale of responses and errors', async (t) => {
  const db = await freshDatabase(t)
  const ta = await buildTestApp(t, { db })
  const text = async (query: string, headers: Record<string, string> = {}) =>
    (await ta.call({ method: 'GET', url: `/v2/profile${query}`, token: null, headers })).json().response_text as string

  t.equal(await text(''), EN, 'DEFAULT_LOCALE (en) when nothing is sent')
  t.equal(await text('', { 'accept-language': 'es' }), ES)
  t.equal(await text('?lang=es'), ES)
  t.equal(await text('?lang=en', { 'accept-language': 'es' }), EN, 'lang beats Accept-Language')
  t.equal(await text('?lang=es', { 'accept-language': 'en' }), ES)
  t.equal(await text('', { 'accept-language': 'en;q=0.1, es;q=0.9' }), ES, 'q-values are honoured')
  t.equal(await text('', { 'accept-language': 'fr, es;q=0.5, en;q=0.4' }), ES, 'unsupported locales are skipped')
  t.equal(await text('', { 'accept-language': 'es-MX' }), ES, 'a region tag resolves to its language')
  t.equal(await text('?lang=ES-es'), ES)
  t.equal(await text('?lang=xx', { 'accept-language': 'es' }), ES, 'an unknown lang falls through')
  t.equal(await text('?lang=xx'), EN, 'and then to the default')
  t.equal(await text('', { 'accept-language': 'fr, de' }), EN)
  t.equal(await text('', { 'accept-language': 'es;q=0' }), EN, 'q=0 means not acceptable')

  t.test('validation errors are localised, field names stay as sent', async (t) => {
    const res = await ta.call({
      method: 'POST',
      url: '/v2/admin/register?lang=es',
      body: { command: 'register-admin', data: { email: 'bad', password: 'short', name: 'A', sub_role_code: 'clerk' } },
    })
    t.equal(res.statusCode, 400)
    t.equal(res.json().response_text, 'La solicitud no es válida.')
    t.same(res.json().errors, [
      { field: 'email', message: 'debe ser una dirección de correo electrónico válida' },
      { field: 'password', message: 'debe tener al menos 8 caracteres' },
    ])
    const en = await ta.call({
      method: 'POST',
      url: '/v2/admin/register',
      body: { command: 'register-admin', data: { email: 'bad', password: 'short', name: 'A', sub_role_code: 'clerk' } },
    })
    t.same(en.json().errors, [
      { field: 'email', message: 'must be a valid e-mail address' },
      { field: 'password', message: 'must be at least 8 characters long' },
    ])
  })

  t.test('concurrent requests in different locales each get their own', async (t) => {
    const requests = Array.from({ length: 60 }, (_, i) => {
      const locale = i % 3 === 0 ? 'es' : 'en'
      const byQuery = i % 2 === 0
      return ta
        .call({
          method: 'GET',
          url: `/v2/profile${byQuery ? `?lang=${locale}` : ''}`,
          token: null,
          headers: byQuery ? {} : { 'accept-language': locale },
        })
        .then((res) => ({ locale, text: res.json().response_text as string }))
    })
    const answers = await Promise.all(requests)
    const wrong = answers.filter((a) => a.text !== (a.locale === 'es' ? ES : EN))
    t.equal(wrong.length, 0, 'no locale leaks between overlapping requests')
    t.ok(answers.some((a) => a.locale === 'es') && answers.some((a) => a.locale === 'en'))
  })

  t.test('DEFAULT_LOCALE', async (t) => {
    const spanish = await buildTestApp(t, { db, env: { DEFAULT_LOCALE: 'es' } })
    const res = await spanish.call({ method: 'GET', url: '/v2/profile', token: null })
    t.equal(res.json().response_text, ES)
    const en = await spanish.call({ method: 'GET', url: '/v2/profile', token: null, headers: { 'accept-language': 'en' } })
    t.equal(en.json().response_text, EN)
  })
})
