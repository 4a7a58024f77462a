import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { ErrorCode } from '../../domain/errors.js'
import { SHARED_SCHEMAS, nameSchemas } from './components.js'
import { componentRef, operationsOf, type OpenapiDocument, type ResponseObject } from './document.js'
import { OPERATIONS, type OperationDoc } from './operations.js'
import { describeStatus, errorStatuses, routeErrors, statusHeading } from './responses.js'
import { byCodeUnits } from '../../domain/textOrder.js'

const DESCRIPTION = [
  'Administrator accounts and permissions: Casbin RBAC with domains and explicit deny.',
  'Every answer is an envelope: `{"response_code": "001", "response_text": "Success", "data": {…}}` on success, ' +
    '`{"response_code": "<code>", "response_text": "<localised text>", "errors": [{"field", "message"}]}` on error. ' +
    'Send `?lang=es` or `Accept-Language: es` for Spanish. Every answer carries `x-policy-revision`, the policy revision ' +
    'the answering server reflects; writes answer `data.revision`, and reads accept `min_revision` (check-batch: `data.min_revision`): ' +
    'a server that has applied less waits up to `MIN_REVISION_WAIT_MS`, then answers 503 `902`, whatever the value.',
  'Each operation lists the `response_code` values it answers with. Beyond those, any request may be answered ' +
    '400, 408, 414 or 431 `604` (a bad URL or content length, a path parameter too long, a request not received in time, ' +
    'headers over 16 KB, malformed HTTP), 404 `400` (no such endpoint), 405 `603` (the path does not answer this method; ' +
    '`Allow` lists those it does), 500 `900` (a bug, logged with the request id) and 503 `901` while the server is stopping.',
].join('\n\n')

const TAGS = [
  { name: 'health', description: 'Liveness and readiness, for orchestrators.' },
  { name: 'auth', description: 'Access tokens.' },
  { name: 'profile', description: "The caller's own account." },
  { name: 'accounts', description: 'Administrator accounts and merchants.' },
  { name: 'permissions', description: 'Grants, per-user overrides, the catalog and the audit trail.' },
  { name: 'authz', description: "The gateway's questions, answered from memory." },
  { name: 'changes', description: 'The committed changes after a revision: polled, or followed as Server-Sent Events.' },
]

const BEARER = [{ bearerAuth: [] }]

/** What the document learns of a route while @fastify/swagger reads it. */
interface RouteFacts {
  entry: OperationDoc
  errors: ErrorCode[]
}

/** The route's entry in OPERATIONS, for a route declared with one method. */
function entryOf(method: unknown, url: string): OperationDoc | undefined {
  return typeof method === 'string' ? OPERATIONS[`${method} ${url}`] : undefined
}

/** Descriptions and `x-response-codes` for the success statuses the route declares, and the error statuses it can answer. */
function responsesOf(declared: Record<string, ResponseObject>, { entry, errors }: RouteFacts): Record<string, ResponseObject> {
  const responses: Array<[string, ResponseObject]> = []
  for (const [status, response] of Object.entries(declared)) {
    if (!status.startsWith('2')) continue
    if (response.content === undefined) {
      responses.push([status, { description: `${statusHeading(Number(status))}: ${entry.returns}.` }])
    } else if (response.content['application/json'] === undefined) {
      // Not an envelope (the policy's CSV): the body is the answer itself, with no response_code.
      responses.push([status, { ...response, description: `${statusHeading(Number(status))}: ${entry.returns}.` }])
    } else {
      const description = describeStatus(Number(status), [{ responseCode: '001', meaning: entry.returns }])
      responses.push([status, { ...response, description, 'x-response-codes': ['001'] }])
    }
  }
  for (const { status, codes } of errorStatuses(errors, entry.notes)) {
    responses.push([
      String(status),
      {
        description: describeStatus(status, codes),
        content: { 'application/json': { schema: { $ref: componentRef('ErrorEnvelope') } } },
        'x-response-codes': codes.map((c) => c.responseCode),
      },
    ])
  }
  return Object.fromEntries(responses.sort(([a], [b]) => byCodeUnits(a, b)))
}

/**
 * The options of @fastify/swagger: `transform` gives each route its entry's
 * operationId, summary and security, and notes the errors its options imply;
 * `transformObject` then writes every response from those facts and names
 * the shared schemas.
 */
export function swaggerOptions(): FastifyDynamicSwaggerOptions {
  const facts = new Map<string, RouteFacts>()
  return {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Admin permission service', description: DESCRIPTION, version: '2.0.0' },
      servers: [{ url: '/', description: 'The server this document is served from' }],
      tags: TAGS,
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
        // TypeBox schemas are JSON Schema, which @fastify/swagger converts; its types expect OpenAPI's own schema objects.
        schemas: SHARED_SCHEMAS as Record<string, object>,
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const entry = entryOf(route.method, url)
      if (entry === undefined || schema.hide === true) return { schema, url }
      const isPublic = route.config?.public === true
      facts.set(entry.operationId, { entry, errors: [...routeErrors(route), ...entry.errors] })
      const { operationId, summary, description } = entry
      return { schema: { ...schema, operationId, summary, ...(description !== undefined ? { description } : {}), security: isPublic ? [] : BEARER }, url }
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) throw new Error('OpenAPI: the document is built as OpenAPI 3')
      // Built by @fastify/swagger from the options above: a complete document, typed loosely by the library.
      const doc = documentObject.openapiObject as unknown as OpenapiDocument
      const dataNames = new Map<string, string>()
      for (const { operation } of operationsOf(doc)) {
        const known = operation.operationId === undefined ? undefined : facts.get(operation.operationId)
        if (known === undefined) continue
        operation.responses = responsesOf(operation.responses, known)
        if (known.entry.data !== undefined) dataNames.set(known.entry.operationId, known.entry.data)
      }
      nameSchemas(doc, dataNames)
      // The order a reader wants, whatever order the library assembled it in.
      const { openapi, info, servers, tags, paths, components } = doc
      const ordered: OpenapiDocument = { openapi, info, servers, tags, paths, components }
      return ordered as unknown as ReturnType<NonNullable<FastifyDynamicSwaggerOptions['transformObject']>>
    },
  }
}
