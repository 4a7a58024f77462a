import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'

const NO_PARAMETERS = { type: 'object', properties: {}, additionalProperties: false } as const

/**
 * A query parameter a route does not declare is refused with 400 `100`
 * naming it, as an unknown body field is: every route declared after this
 * plugin gets `additionalProperties: false` on its query string schema, and
 * one that declares no query string gets an empty one. A misspelt filter
 * (`?merchantid=`) then fails loudly instead of listing everything.
 * Preflights (OPTIONS) keep the query of the request they announce; the
 * forward-auth prefix form (`foreignQuery`) passes the client's own through.
 */
const queryParameters: FastifyPluginAsync = async (app) => {
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    if (route.config?.foreignQuery === true || methods.includes('OPTIONS')) return
    const declared = route.schema?.querystring as Record<string, unknown> | undefined
    route.schema = { ...route.schema, querystring: declared === undefined ? NO_PARAMETERS : { ...declared, additionalProperties: false } }
  })
}

export default fp(queryParameters, { fastify: '5.x', name: 'query-parameters' })
