import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Localizer, Translate } from '../../i18n/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Catalog labels in a request's locale (routes that answer catalog entries). */
    localizer: Localizer
  }
  interface FastifyRequest {
    locale: string
    t: Translate
    /** The negotiated locale once asked for ('' before). */
    negotiatedLocale: string
  }
}

/**
 * Picks each request's locale and gives it its own fixed translator (no
 * shared mutable state). Worked out the first time a request asks, not in a
 * hook: the gateway's allowed answers carry no text, and a hook on every
 * request would cost them a call and a negotiation for nothing.
 */
const localePlugin: FastifyPluginAsync<{ localizer: Localizer }> = async (app, { localizer }) => {
  app.decorate('localizer', localizer)
  app.decorateRequest('negotiatedLocale', '')
  app.decorateRequest('locale', {
    getter(this: FastifyRequest): string {
      if (this.negotiatedLocale === '') {
        const query = this.query as Record<string, unknown> | undefined
        const lang = typeof query?.lang === 'string' ? query.lang : undefined
        const header = this.headers['accept-language']
        this.negotiatedLocale = localizer.negotiate(lang, typeof header === 'string' ? header : undefined)
      }
      return this.negotiatedLocale
    },
  })
  app.decorateRequest('t', {
    getter(this: FastifyRequest): Translate {
      return localizer.translator(this.locale)
    },
  })
}

export default fp(localePlugin, { fastify: '5.x', name: 'locale' })
