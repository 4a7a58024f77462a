import { byCodeUnits } from '../../domain/textOrder.js'

/**
 * The parts of an OpenAPI 3.0 document this service's document is made of,
 * as @fastify/swagger builds it (a plain JSON value throughout).
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject
export interface JsonObject {
  [key: string]: JsonValue
}

export interface MediaType {
  schema?: JsonObject
  example?: JsonValue
  examples?: JsonObject
}

export interface ResponseObject {
  description: string
  content?: Record<string, MediaType>
  /** The `response_code` values this status answers with, for generated clients and docs/api.md. */
  'x-response-codes'?: string[]
}

export interface ParameterObject {
  in: string
  name: string
  required?: boolean
  description?: string
  schema?: JsonObject
  example?: JsonValue
}

export interface OperationObject {
  operationId?: string
  summary?: string
  description?: string
  tags?: string[]
  parameters?: ParameterObject[]
  requestBody?: { required?: boolean; content: Record<string, MediaType> }
  security?: Array<Record<string, string[]>>
  responses: Record<string, ResponseObject>
}

export interface OpenapiDocument {
  openapi: string
  info: { title: string; description?: string; version: string }
  servers?: Array<{ url: string; description?: string }>
  tags?: Array<{ name: string; description?: string }>
  paths: Record<string, Record<string, OperationObject>>
  components: { schemas: Record<string, JsonObject>; securitySchemes?: JsonObject }
}

/** The methods a path item may hold, in the order the document lists them. */
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const

/** Every operation of the document with its method and path, in document order. */
export function operationsOf(doc: OpenapiDocument): Array<{ method: string; path: string; operation: OperationObject }> {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    HTTP_METHODS.flatMap((method) => {
      const operation = item[method]
      return operation === undefined ? [] : [{ method, path, operation }]
    }),
  )
}

/** `/v2/admin/accounts/{userId}` as its route declares it: `/v2/admin/accounts/:userId`. */
export const routePath = (path: string): string => path.replace(/\{([^}]+)\}/g, ':$1')

export const componentRef = (name: string): string => `#/components/schemas/${name}`

/** JSON with every object's keys sorted: equal for structurally equal values. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => byCodeUnits(a, b)))
      : v,
  )
}

/** The document as openapi.json holds it: two-space JSON and a final newline. */
export const serializeDocument = (doc: OpenapiDocument): string => `${JSON.stringify(doc, null, 2)}\n`
