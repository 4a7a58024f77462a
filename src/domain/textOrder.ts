/**
 * Text in code-unit order, never the locale's: `localeCompare` depends on
 * the machine's ICU data and locale, so lists, generated documents and
 * exports would come out in another order elsewhere.
 */
export const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)
