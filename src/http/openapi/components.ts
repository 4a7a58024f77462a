import type { TSchema } from '@sinclair/typebox'
import { Account, CreatedAccount, FieldErrorSchema } from '../../schemas/common.js'
import { ChangeItem } from '../../schemas/changes.js'
import {
  AccessPreview,
  AppliedChangesData,
  AuditItem,
  CatalogItem,
  CheckReason,
  CheckResultItem,
  PairData,
  RoleChangeData,
  RolePermissionsData,
  UserChangeData,
  UserPermissionsData,
} from '../../schemas/permissions.js'
import { HTTP_METHODS, canonicalJson, componentRef, type JsonObject, type JsonValue, type OpenapiDocument } from './document.js'
import { byCodeUnits } from '../../domain/textOrder.js'

/**
 * Shapes several routes share, by the names the document gives them.
 * @fastify/swagger converts them to OpenAPI 3.0 with the route schemas, so
 * a copy inside a route converts to the same JSON, and nameSchemas replaces
 * it with a reference.
 */
export const SHARED_SCHEMAS: Readonly<Record<string, TSchema>> = {
  AccessPreview,
  Account,
  AppliedPermissionChanges: AppliedChangesData,
  AuditEntry: AuditItem,
  CatalogEntry: CatalogItem,
  ChangeItem,
  CheckReason,
  CheckResult: CheckResultItem,
  CreatedAccount,
  FieldError: FieldErrorSchema,
  PermissionPair: PairData,
  RolePermissionChange: RoleChangeData,
  RolePermissions: RolePermissionsData,
  UserPermissionChange: UserChangeData,
  UserPermissions: UserPermissionsData,
}

/** `grant-role-permission` → `GrantRolePermission`. */
const pascalCase = (kebab: string): string =>
  kebab
    .split('-')
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('')

const isObject = (value: JsonValue | undefined): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value)

/**
 * Replaces, top down, every schema equal to a named one by a reference to
 * it; a named schema's own root is left alone, its insides are not.
 */
function referenceNamed(doc: OpenapiDocument): void {
  const names = new Map<string, string>()
  for (const [name, schema] of Object.entries(doc.components.schemas)) names.set(canonicalJson(schema), name)
  const visit = (value: JsonValue, root: boolean): JsonValue => {
    if (Array.isArray(value)) return value.map((v) => visit(v, false))
    if (!isObject(value)) return value
    const name = root ? undefined : names.get(canonicalJson(value))
    if (name !== undefined) return { $ref: componentRef(name) }
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, visit(v, false)]))
  }
  for (const [name, schema] of Object.entries(doc.components.schemas)) doc.components.schemas[name] = visit(schema, true) as JsonObject
  for (const item of Object.values(doc.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method]
      if (operation === undefined) continue
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        if (media.schema !== undefined) media.schema = visit(media.schema, false) as JsonObject
      }
      for (const response of Object.values(operation.responses)) {
        for (const media of Object.values(response.content ?? {})) {
          if (media.schema !== undefined) media.schema = visit(media.schema, false) as JsonObject
        }
      }
    }
  }
}

/** Puts `schema` under `name`, which must be free or hold the same shape; answers the reference. */
function nameSchema(doc: OpenapiDocument, name: string, schema: JsonObject, owner: string): JsonObject {
  const ref = componentRef(name)
  if (schema.$ref === ref) return schema
  if (typeof schema.$ref === 'string') throw new Error(`OpenAPI: ${owner} is ${schema.$ref}, but its entry names it ${name}`)
  const existing = doc.components.schemas[name]
  if (existing !== undefined && canonicalJson(existing) !== canonicalJson(schema)) {
    throw new Error(`OpenAPI: ${owner} differs from the schema already named ${name}: give it a name of its own in src/http/openapi/operations.ts`)
  }
  doc.components.schemas[name] = schema
  return { $ref: ref }
}

/**
 * Gives names to the document's bodies: every command body becomes
 * `<OperationId>Command`, every success answer's `data` the name its entry
 * gives it (`dataNames`, by operationId), and every copy of a named shape a
 * reference to it.
 */
export function nameSchemas(doc: OpenapiDocument, dataNames: ReadonlyMap<string, string>): void {
  referenceNamed(doc)
  for (const item of Object.values(doc.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method]
      if (operation?.operationId === undefined) continue
      const id = operation.operationId
      const body = operation.requestBody?.content['application/json']
      if (body?.schema !== undefined) body.schema = nameSchema(doc, `${pascalCase(id)}Command`, body.schema, `the body of ${id}`)
      const dataName = dataNames.get(id)
      if (dataName === undefined) continue
      for (const [status, response] of Object.entries(operation.responses)) {
        const envelope = response.content?.['application/json']?.schema
        const properties = envelope?.properties
        if (!status.startsWith('2') || !isObject(properties) || !isObject(properties.data)) continue
        properties.data = nameSchema(doc, dataName, properties.data, `the data of ${id}`)
      }
    }
  }
  // Shapes named just now may occur inside others (a page's items, an answer's account).
  referenceNamed(doc)
  doc.components.schemas = Object.fromEntries(Object.entries(doc.components.schemas).sort(([a], [b]) => byCodeUnits(a, b)))
}
