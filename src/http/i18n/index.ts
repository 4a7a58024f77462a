import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import i18next, { type TFunction } from 'i18next'
import Negotiator from 'negotiator'

// The message files sit beside this module: in src/ when run from source, and
// in dist/ because the build compiles them there too (tsconfig.build.json), so
// the built service needs no src/ folder.
const messagesDir = fileURLToPath(new URL('./', import.meta.url))

export type Translate = TFunction

export interface Localizer {
  readonly locales: readonly string[]
  readonly defaultLocale: string
  /** `lang` beats `Accept-Language` (with its q-values), which beats the default; unknown locales are skipped. */
  negotiate(lang: string | undefined, acceptLanguage: string | undefined): string
  /** A translator fixed to one locale: safe to hold for a whole request, whatever other requests do. */
  translator(locale: string): Translate
}

function readMessages(dir: string): Record<string, { translation: Record<string, unknown> }> {
  const resources: Record<string, { translation: Record<string, unknown> }> = {}
  for (const file of readdirSync(dir)) {
    const match = /^([a-z]{2}(?:-[A-Z]{2})?)\.json$/.exec(file)
    if (match?.[1] === undefined) continue
    resources[match[1]] = { translation: JSON.parse(readFileSync(`${dir}/${file}`, 'utf8')) as Record<string, unknown> }
  }
  return resources
}

export function createLocalizer(defaultLocale: string, dir = messagesDir): Localizer {
  const resources = readMessages(dir)
  const locales = Object.keys(resources)
  const fallback = locales.includes(defaultLocale) ? defaultLocale : 'en'
  const instance = i18next.createInstance()
  void instance.init({
    resources,
    lng: fallback,
    fallbackLng: fallback,
    initAsync: false,
    interpolation: { escapeValue: false },
  })
  const translators = new Map(locales.map((locale) => [locale, instance.getFixedT(locale)]))

  const supported = (tag: string): string | undefined => {
    const lower = tag.trim().toLowerCase()
    return locales.find((l) => l.toLowerCase() === lower) ?? locales.find((l) => l.toLowerCase() === lower.split('-')[0])
  }

  return {
    locales,
    defaultLocale: fallback,
    negotiate(lang, acceptLanguage) {
      if (lang !== undefined) {
        const chosen = supported(lang)
        if (chosen !== undefined) return chosen
      }
      if (acceptLanguage !== undefined && acceptLanguage !== '') {
        const ranked = new Negotiator({ headers: { 'accept-language': acceptLanguage } }).languages()
        for (const tag of ranked) {
          const chosen = tag === '*' ? undefined : supported(tag)
          if (chosen !== undefined) return chosen
        }
      }
      return fallback
    },
    translator(locale) {
      return translators.get(locale) ?? (translators.get(fallback) as Translate)
    },
  }
}
