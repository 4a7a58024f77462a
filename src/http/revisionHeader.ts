import type { FastifyInstance } from 'fastify'

/** What answers the current policy revision: the replica, once the app is registered. */
interface RevisionSlot {
  replica: { readonly revisionText: string } | null
}

const slots = new WeakMap<FastifyInstance, RevisionSlot>()

/**
 * The slot createFastify's onSend hook reads `x-policy-revision` from: one
 * hook sets every header of every answer (two hooks cost each answer one
 * more step of Fastify's hook runner).
 */
export function revisionSlot(fastify: FastifyInstance): RevisionSlot {
  const slot: RevisionSlot = { replica: null }
  slots.set(fastify, slot)
  return slot
}

/**
 * Every answer of `fastify` says which revision `replica` reflects: through
 * createFastify's hook, or for a Fastify built otherwise through a hook of
 * its own.
 */
export function answerRevision(fastify: FastifyInstance, replica: { readonly revisionText: string }): void {
  const slot = slots.get(fastify)
  if (slot !== undefined) {
    slot.replica = replica
    return
  }
  // Callback style: no promise per request.
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    reply.header('x-policy-revision', replica.revisionText)
    done(null, payload)
  })
}
