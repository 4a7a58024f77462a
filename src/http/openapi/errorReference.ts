import { errorTable, type ErrorEntry } from '../../domain/errors.js'
import { cell } from './reference.js'
import { byCodeUnits } from '../../domain/textOrder.js'

/** Plain text (a localised message, `Bearer <token>`) for a cell: angle brackets would read as HTML. */
const plainCell = (text: string): string => cell(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/**
 * docs/errors.md: every `response_code`, its statuses, what it means and its
 * English text, one row per error of the table (two errors may share a
 * code). Made by `npm run openapi` from the table in src/domain/errors.ts
 * and the English locale file, never by hand.
 */
export function renderErrorReference(english: Readonly<Record<string, unknown>>, table: Readonly<Record<string, ErrorEntry>> = errorTable): string {
  const rows = Object.entries(table)
    .sort(([, a], [, b]) => byCodeUnits(a.responseCode, b.responseCode))
    .map(([code, entry]) => {
      const statuses = [entry.status, ...(entry.alsoStatuses ?? [])].join(', ')
      const text = english[code]
      return `| \`${entry.responseCode}\` | ${statuses} | \`${code}\` | ${cell(entry.meaning)} | ${typeof text === 'string' ? plainCell(text) : '–'} |`
    })
  return [
    '# Error reference',
    '',
    '<!-- Written by `npm run openapi` from the error table in src/domain/errors.ts and src/i18n/en.json; edit those and run it again. -->',
    '',
    'Every answer is an envelope. A success is `{"response_code": "001", "response_text": "Success", "data": {…}}`, with status 200 (201 where the operation creates an account, a merchant or a sub-role). ' +
      'An error is `{"response_code": "<code>", "response_text": "<localised text>", "errors": [{"field", "message"}]}`: decide on `response_code`, which is stable; ' +
      '`response_text` is for people, in the locale the request asks for (`?lang=es` or `Accept-Language: es`), and its wording may change. `errors`, when present, names the fields at fault.',
    '',
    'Which operation answers which codes, and what a code means for that operation where it says more, is in the [API reference](api.md).',
    '',
    '| `response_code` | HTTP | code | meaning | English `response_text` |',
    '|---|---|---|---|---|',
    '| `001` | 200, 201 | – | success | Success |',
    ...rows,
    '',
    '`{{name}}` in a text stands for a value filled in when answering (a field, a limit, a revision).',
    '',
    '## Adding an error',
    '',
    'Add it to `errorTable` in src/domain/errors.ts (its status, a `response_code` not used before, its meaning), give it a text under `errors.<code>` in every locale file of src/i18n/, and run `npm run openapi`. ' +
      'test/http/localisation.test.ts fails until every locale file holds exactly the codes of the table, and test/http/openapi.test.ts until this page and the API reference are written again.',
    '',
  ].join('\n')
}
