import { operationsOf, type JsonObject, type JsonValue, type OpenapiDocument, type OperationObject } from './document.js'

/** Text for a Markdown table cell: one line, pipes escaped. */
export const cell = (text: string): string => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|')

const refName = (ref: string): string => ref.slice(ref.lastIndexOf('/') + 1)

const isObject = (value: JsonValue | undefined): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value)

/** A schema in a few words: `string (uuid)`, `array of [Account](#account)`, `"allow" or "deny" or null`. */
function typeOf(schema: JsonValue | undefined): string {
  if (!isObject(schema)) return 'any'
  if (typeof schema.$ref === 'string') {
    const name = refName(schema.$ref)
    return `[${name}](#${name.toLowerCase()})`
  }
  const union = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : undefined
  if (union !== undefined) return union.map(typeOf).join(' or ')
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => (v === null ? 'null' : `\`${JSON.stringify(v)}\``)).join(' or ')
  const nullable = schema.nullable === true ? ' or null' : ''
  if (schema.type === 'array') return `array of ${typeOf(schema.items)}${nullable}`
  const format = typeof schema.format === 'string' ? ` (${schema.format})` : ''
  return `${typeof schema.type === 'string' ? schema.type : 'any'}${format}${nullable}`
}

function authOf(operation: OperationObject): string {
  const bearer = (operation.security ?? []).some((requirement) => 'bearerAuth' in requirement)
  return bearer ? 'bearer token (`Authorization: Bearer <token>`)' : 'none'
}

function bodyOf(operation: OperationObject): string | undefined {
  const schema = operation.requestBody?.content['application/json']?.schema
  return schema === undefined ? undefined : `${typeOf(schema)} (\`application/json\`)`
}

function parametersOf(operation: OperationObject): string[] {
  const parameters = operation.parameters ?? []
  if (parameters.length === 0) return []
  return [
    '| parameter | in | required | type | description |',
    '|---|---|---|---|---|',
    ...parameters.map((p) => `| \`${p.name}\` | ${p.in} | ${p.required === true ? 'yes' : 'no'} | ${cell(typeOf(p.schema))} | ${cell(p.description ?? '')} |`),
    '',
  ]
}

/** A success answer's `data`, as a link to its schema. */
function dataOf(response: OperationObject['responses'][string]): string {
  const envelope = response.content?.['application/json']?.schema
  const data = isObject(envelope?.properties) ? envelope.properties.data : undefined
  return data === undefined ? '' : `: \`data\` is ${typeOf(data)}`
}

/** One row per `response_code`, read from each response's description list. */
function responsesOf(operation: OperationObject): string[] {
  const rows: string[] = []
  for (const [status, response] of Object.entries(operation.responses)) {
    const lines = response.description.split('\n')
    const codes = lines.flatMap((line) => {
      const match = /^- `(\d{3})`: (.*)$/.exec(line)
      return match === null ? [] : [[match[1] ?? '', match[2] ?? '']]
    })
    if (codes.length === 0) rows.push(`| ${status} | – | ${cell(lines[0] ?? '')} |`)
    const success = status.startsWith('2') ? dataOf(response) : ''
    for (const [code, meaning] of codes) rows.push(`| ${status} | \`${code}\` | ${cell(`${meaning ?? ''}${success}`)} |`)
  }
  return ['| status | `response_code` | meaning |', '|---|---|---|', ...rows, '']
}

function schemaSection(name: string, schema: JsonObject): string[] {
  const lines = [`### ${name}`, '']
  const properties = schema.properties
  if (!isObject(properties)) return [...lines, typeOf(schema), '']
  const required = new Set(Array.isArray(schema.required) ? schema.required : [])
  lines.push('| field | type | required |', '|---|---|---|')
  for (const [field, property] of Object.entries(properties)) {
    lines.push(`| \`${field}\` | ${cell(typeOf(property))} | ${required.has(field) ? 'yes' : 'no'} |`)
  }
  return [...lines, '']
}

/**
 * docs/api.md: the document as a reference to read, operation by operation
 * (grouped by tag), then the named schemas. Made from openapi.json by
 * `npm run openapi`, never by hand.
 */
export function renderApiReference(doc: OpenapiDocument): string {
  const operations = operationsOf(doc)
  const tagOf = (operation: OperationObject): string => operation.tags?.[0] ?? 'other'
  // The document's tags in its order, then any an operation uses without the document describing it.
  const tags: Array<{ name: string; description?: string }> = [...(doc.tags ?? [])]
  for (const { operation } of operations) {
    if (!tags.some((tag) => tag.name === tagOf(operation))) tags.push({ name: tagOf(operation) })
  }
  const out: string[] = [
    `# ${doc.info.title}: API reference`,
    '',
    '<!-- Written by `npm run openapi` from openapi.json; edit src/http/openapi/ and run it again. -->',
    '',
    `Version ${doc.info.version}, OpenAPI ${doc.openapi}. The machine-readable document is [openapi.json](../openapi.json) (served at \`/docs/json\`); every \`response_code\` is explained in the [error reference](errors.md).`,
    '',
    doc.info.description ?? '',
    '',
    '| operation | method | path | summary |',
    '|---|---|---|---|',
    ...operations.map(({ method, path, operation }) => {
      const id = operation.operationId === undefined ? '(no operationId)' : `[${operation.operationId}](#${operation.operationId})`
      return `| ${id} | ${method.toUpperCase()} | \`${path}\` | ${cell(operation.summary ?? '')} |`
    }),
    '',
  ]
  for (const tag of tags) {
    const tagged = operations.filter(({ operation }) => tagOf(operation) === tag.name)
    if (tagged.length === 0) continue
    out.push(`## ${tag.name}`, '', tag.description ?? '', '')
    for (const { method, path, operation } of tagged) {
      out.push(`### ${operation.operationId ?? `${method.toUpperCase()} ${path}`}`, '', `\`${method.toUpperCase()} ${path}\`: ${operation.summary ?? ''}`, '')
      if (operation.description !== undefined) out.push(operation.description, '')
      out.push(`- auth: ${authOf(operation)}`)
      const body = bodyOf(operation)
      if (body !== undefined) out.push(`- body: ${body}`)
      out.push('', ...parametersOf(operation), ...responsesOf(operation))
    }
  }
  out.push('## Schemas', '')
  for (const [name, schema] of Object.entries(doc.components.schemas)) out.push(...schemaSection(name, schema))
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`
}
