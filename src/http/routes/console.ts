import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyPluginAsync, FastifyReply } from 'fastify'

/** The console's files: a folder at the repository's root, beside src/ and dist/ alike. */
const CONSOLE_DIR = fileURLToPath(new URL('../../../console/', import.meta.url))

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
}

/**
 * Scripts and styles from this origin only, nothing inline, no frames, no
 * plugins; the API is called on the same origin. Inline `style` attributes
 * are not used either.
 */
const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

interface StaticFile {
  body: Buffer
  type: string
}

/** Every file of the console, read once: a fixed set of names, so no path from a request ever reaches the disk. */
function consoleFiles(): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>()
  for (const name of readdirSync(CONSOLE_DIR)) {
    const type = CONTENT_TYPES[extname(name)]
    if (type !== undefined) files.set(name, { body: readFileSync(join(CONSOLE_DIR, name)), type })
  }
  // Preact, its hooks and htm in one ES module with no bare imports, as the htm package ships it.
  // The package's exports map names no file path, so the file is found beside its main entry (dist/htm.js).
  const vendor = join(dirname(createRequire(import.meta.url).resolve('htm')), '..', 'preact', 'standalone.module.js')
  files.set('preact-htm.js', { body: readFileSync(vendor), type: CONTENT_TYPES['.js'] as string })
  return files
}

/** The admin console at /console: static files served by this process, a client of the public API like any other. */
export const consoleRoutes: FastifyPluginAsync = async (app) => {
  const files = consoleFiles()
  const options = { config: { public: true }, schema: { hide: true } }
  app.addHook('onSend', (_request, reply, payload, done) => {
    reply.header('content-security-policy', CONSOLE_CSP)
    reply.header('x-frame-options', 'DENY')
    reply.header('referrer-policy', 'no-referrer')
    done(null, payload)
  })
  app.get('/console', options, (_request, reply) => reply.redirect('/console/', 302))
  app.get('/console/', options, (_request, reply) => serve(reply, 'index.html'))
  app.get<{ Params: { file: string } }>('/console/:file', options, (request, reply) => serve(reply, request.params.file))
  function serve(reply: FastifyReply, name: string) {
    const file = files.get(name)
    if (file === undefined) return reply.callNotFound()
    return reply.header('content-type', file.type).header('cache-control', 'no-cache').send(file.body)
  }
}
