import type { Service } from '../../compose.js'
import app from '../app.js'
import { createFastify } from '../fastifyOptions.js'
import { errorTexts } from '../../i18n/index.js'
import { serializeDocument, type OpenapiDocument } from './document.js'
import { renderErrorReference } from './errorReference.js'
import { renderApiReference } from './reference.js'

/** The files `npm run openapi` writes, by their path from the repository's root. */
export const GENERATED_FILES = ['openapi.json', 'docs/api.md', 'docs/errors.md'] as const
export type GeneratedFile = (typeof GENERATED_FILES)[number]

/**
 * The document the app serves at /docs/json, from the real app over
 * `service`. It depends on the routes and their schemas only, not on the
 * data or the configuration, so any throwaway service gives the same one.
 */
async function buildDocument(service: Service): Promise<OpenapiDocument> {
  const fastify = createFastify(service.config)
  try {
    await fastify.register(app, { service })
    await fastify.ready()
    // @fastify/swagger types its answer as any OpenAPI version; the app builds 3.0 (see openapi/index.ts).
    return fastify.swagger() as unknown as OpenapiDocument
  } finally {
    await fastify.close()
  }
}

/** The text of every generated file. */
export async function generateFiles(service: Service): Promise<Record<GeneratedFile, string>> {
  const doc = await buildDocument(service)
  return {
    'openapi.json': serializeDocument(doc),
    'docs/api.md': renderApiReference(doc),
    'docs/errors.md': renderErrorReference(errorTexts().en ?? {}),
  }
}
