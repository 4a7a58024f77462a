import { readdirSync, readFileSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
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
  /**
   * A catalog entry with its label and group in the locale, where that
   * locale's file translates them (`catalog.labels["obj:act"]`,
   * `catalog.groups[group]`); else as declared in code. No other locale is
   * fallen back to: an untranslated label stays as declared.
   */
  localiseCatalogEntry<T extends CatalogText>(locale: string, entry: T): T
}

/** What of a catalog entry is text for people. */
export interface CatalogText {
  obj: string
  act: string
  label: string
  group_name: string
}

interface CatalogTranslations {
  labels: Map<string, string>
  groups: Map<string, string>
}

const textEntries = (value: unknown): Map<string, string> =>
  new Map(
    typeof value === 'object' && value !== null
      ? Object.entries(value).filter((pair): pair is [string, string] => typeof pair[1] === 'string')
      : [],
  )

function catalogTranslations(translation: Record<string, unknown>): CatalogTranslations {
  const catalog = (translation.catalog ?? {}) as Record<string, unknown>
  return { labels: textEntries(catalog.labels), groups: textEntries(catalog.groups) }
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

/**
 * Each locale's error texts (`errors.<code>`), as its file holds them, by
 * locale: what docs/errors.md quotes and what a test holds to the codes of
 * the error table.
 */
export function errorTexts(dir = messagesDir): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    Object.entries(readMessages(dir)).map(([locale, { translation }]) => {
      const errors = translation.errors
      return [locale, typeof errors === 'object' && errors !== null ? (errors as Record<string, unknown>) : {}]
    }),
  )
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
  const catalogs = new Map(Object.entries(resources).map(([locale, { translation }]) => [locale, catalogTranslations(translation)]))

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
    localiseCatalogEntry(locale, entry) {
      const catalog = catalogs.get(locale)
      if (catalog === undefined) return entry
      const label = catalog.labels.get(`${entry.obj}:${entry.act}`)
      const group = catalog.groups.get(entry.group_name)
      if (label === undefined && group === undefined) return entry
      return { ...entry, label: label ?? entry.label, group_name: group ?? entry.group_name }
    },
  }
}

/** A permissions answer (a role's, with its denies; a user's) with its entries' labels and groups in the locale. */
export function localisedPermissions<T extends { permissions: CatalogText[]; denied?: CatalogText[] }>(localizer: Localizer, locale: string, result: T): T {
  const localise = (p: CatalogText) => localizer.localiseCatalogEntry(locale, p)
  return { ...result, permissions: result.permissions.map(localise), ...(result.denied !== undefined && { denied: result.denied.map(localise) }) }
}

/**
 * The translator for a request the locale plugin has not seen (an answer
 * given before any route runs, or once the server is stopping): its `lang`
 * read from the raw URL, then its `Accept-Language`, as the plugin reads them.
 */
export function rawRequestTranslator(localizer: Localizer, request: Pick<IncomingMessage, 'url' | 'headers'>): Translate {
  const query = request.url?.split('?')[1]
  const lang = query !== undefined ? (new URLSearchParams(query).get('lang') ?? undefined) : undefined
  return localizer.translator(localizer.negotiate(lang, request.headers['accept-language']))
}
