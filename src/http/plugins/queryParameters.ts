import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { Lang } from '../../schemas/common.js'

// `lang` picks the answer's locale on every route, errors included (a POST's refusal, /readyz's 503).
const LANG_ONLY = { type: 'object', properties: { lang: Lang }, additionalProperties: false } as const

/**
 * A query parameter a route does not declare is refused with 400 `100`
 * naming it, as an unknown body field is: every route declared after this
 * plugin gets `additionalProperties: false` on its query string schema, and
 * one that declares no query string gets one of `lang` alone (the locale
 * parameter every route takes, its own or not). A misspelt filter
 * (`?merchantid=`) then fails loudly instead of listing everything.
 * Preflights (OPTIONS) keep the query of the request they announce; the
 * forward-auth prefix form (`foreignQuery`) passes the client's own through.
 */
const queryParameters: FastifyPluginAsync = async (app) => {
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    if (route.config?.foreignQuery === true || methods.includes('OPTIONS')) return
    const declared = route.schema?.querystring as { properties?: Record<string, unknown> } | undefined
    route.schema = {
      ...route.schema,
      querystring: declared === undefined ? LANG_ONLY : { ...declared, properties: { lang: Lang, ...declared.properties }, additionalProperties: false },
    }
  })
}

export default fp(queryParameters, { fastify: '5.x', name: 'query-parameters' })
