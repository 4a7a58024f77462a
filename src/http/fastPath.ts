import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'

/**
 * A handler that may answer a request before Fastify sees it: true when it
 * has answered, false to leave the request to Fastify untouched.
 */
export type FastPath = (request: IncomingMessage, response: ServerResponse) => boolean

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void

const slots = new WeakMap<FastifyInstance, { path: FastPath | null }>()

/**
 * Puts Fastify, the server's request listener, behind a slot a fast path
 * may fill later (serveFirst). A stop swaps every request listener out
 * (ConnectionDrain), the fast path with Fastify.
 */
export function putBehindFastPath(fastify: FastifyInstance): void {
  const slot: { path: FastPath | null } = { path: null }
  slots.set(fastify, slot)
  for (const listener of fastify.server.listeners('request') as RequestListener[]) {
    fastify.server.removeListener('request', listener)
    fastify.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      if (slot.path === null || !slot.path(request, response)) listener(request, response)
    })
  }
}

/**
 * Lets `path` answer the requests it recognises before Fastify: over HTTP
 * only (inject() calls Fastify directly). A Fastify not built by
 * createFastify() has no slot, and all its requests go through Fastify.
 */
export function serveFirst(fastify: FastifyInstance, path: FastPath): void {
  const slot = slots.get(fastify)
  if (slot !== undefined) slot.path = path
}
