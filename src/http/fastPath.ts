import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { kFastPathSlot } from './symbols.js'

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void

/**
 * A handler that may answer a request before Fastify sees it: true when it
 * has taken the request, false to leave it to Fastify untouched. One that
 * took it and must read its body before deciding may hand it to Fastify
 * later with `toFastify`, once the body is given back to the request.
 */
export type FastPath = (request: IncomingMessage, response: ServerResponse, toFastify: RequestListener) => boolean

interface Slot {
  path: FastPath | null
  stopping: () => boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set by putBehindFastPath(): the fast path answering before Fastify, if any. */
    [kFastPathSlot]?: Slot
  }
}

/**
 * Puts Fastify, the server's request listener, behind a slot a fast path
 * may fill later (serveFirst). A stop swaps every request listener out
 * (ConnectionDrain), the fast path with Fastify.
 */
export function putBehindFastPath(fastify: FastifyInstance, stopping: () => boolean): void {
  const slot: Slot = { path: null, stopping }
  fastify.decorate(kFastPathSlot, slot)
  for (const listener of fastify.server.listeners('request') as RequestListener[]) {
    fastify.server.removeListener('request', listener)
    fastify.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      // Fastify's listener itself is handed over: no closure is made per request.
      if (slot.path === null || !slot.path(request, response, listener)) listener(request, response)
    })
  }
}

/**
 * Lets `path` answer the requests it recognises before Fastify: over HTTP
 * only (inject() calls Fastify directly). A Fastify not built by
 * createFastify() has no slot, and all its requests go through Fastify.
 */
export function serveFirst(fastify: FastifyInstance, path: FastPath): void {
  const slot = fastify[kFastPathSlot]
  if (slot !== undefined) slot.path = path
}

/**
 * Whether the server behind `fastify`'s slot is stopping: a fast path that
 * answers after the request arrived (check-batch, once its body is read)
 * leaves the answer to Fastify then, which closes the connection.
 */
export function stoppingOf(fastify: FastifyInstance): () => boolean {
  return fastify[kFastPathSlot]?.stopping ?? (() => false)
}
