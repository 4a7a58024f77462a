/**
 * The service's state on a Fastify instance, kept as Fastify keeps its own
 * (its lib/symbols.js): named symbols in one list, each set once by
 * createFastify() with `decorate`, typed where it is set. Plugins registered
 * inside the instance read the same value through its prototype.
 */
export const kConnectionDrain = Symbol('admin-permission-service.connectionDrain')
export const kFastPathSlot = Symbol('admin-permission-service.fastPathSlot')
export const kRevisionSlot = Symbol('admin-permission-service.revisionSlot')
