import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Localizer, Translate } from '../i18n/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Catalog labels in a request's locale (routes that answer catalog entries). */
    localizer: Localizer
  }
  interface FastifyRequest {
    locale: string
    t: Translate
  }
}

/** Picks each request's locale and gives it its own fixed translator (no shared mutable state). */
const localePlugin: FastifyPluginAsync<{ localizer: Localizer }> = async (app, { localizer }) => {
  app.decorate('localizer', localizer)
  app.decorateRequest('locale', '')
  app.decorateRequest('t', null as unknown as Translate)
  app.addHook('onRequest', (request, _reply, done) => {
    const query = request.query as Record<string, unknown> | undefined
    const lang = typeof query?.lang === 'string' ? query.lang : undefined
    const header = request.headers['accept-language']
    request.locale = localizer.negotiate(lang, typeof header === 'string' ? header : undefined)
    request.t = localizer.translator(request.locale)
    done()
  })
}

export default fp(localePlugin, { fastify: '5.x', name: 'locale' })
