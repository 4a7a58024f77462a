import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { changeFilter, changeStreamStart, listChanges } from '../../commands/listChanges.js'
import type { Service } from '../../compose.js'
import { routePermissions } from '../../domain/permissions.js'
import { ChangeHub } from '../../replica/changeHub.js'
import { ChangesPage, ChangesQuery, ChangeStreamQuery } from '../../schemas/changes.js'
import { bearer, responses } from '../../schemas/common.js'
import { ChangeStreams } from '../changeStream.js'
import { success } from '../envelope.js'
import { callerOf } from '../plugins/authentication.js'
import { addServiceHeaders } from '../serviceHeaders.js'

/** The change stream (CONTRACT 18): a poll of committed changes after a revision, and the same items as Server-Sent Events. */
export const changeRoutes: FastifyPluginAsyncTypebox<{ ctx: Service }> = async (app, { ctx }) => {
  const streams = new ChangeStreams(ctx.db, new ChangeHub(ctx.db, ctx.replica, app.log), ctx.config.changeStream)
  // Streams never end by themselves: at shutdown they end before the server waits for its connections.
  app.addHook('preClose', (done) => {
    streams.closeAll()
    done()
  })

  app.get(
    '/v2/admin/changes',
    {
      config: { permission: routePermissions.permissionRead },
      schema: { tags: ['changes'], security: bearer, querystring: ChangesQuery, response: responses(200, ChangesPage, [410]) },
    },
    async (request) => success(await listChanges(ctx, callerOf(request), request.query)),
  )

  app.get(
    '/v2/admin/changes/stream',
    {
      config: { permission: routePermissions.permissionRead },
      schema: {
        tags: ['changes'],
        security: bearer,
        querystring: ChangeStreamQuery,
        headers: Type.Object({ 'last-event-id': Type.Optional(Type.String({ maxLength: 64 })) }),
        response: { ...responses(200, Type.Null(), [410, 429]), 200: { content: { 'text/event-stream': { schema: Type.String() } } } },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request)
      const slot = streams.reserve(request.ip)
      try {
        const cursor = await changeStreamStart(ctx, { after: request.query.after, lastEventId: request.headers['last-event-id'] })
        const headers: Record<string, string | number> = {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          // nginx and Caddy would otherwise hold events back in their buffers.
          'x-accel-buffering': 'no',
        }
        addServiceHeaders(headers, request.id, ctx.replica)
        void reply.hijack()
        const behind = request.t('errors.CHANGE_STREAM_BEHIND', { bytes: ctx.config.changeStream.bufferBytes })
        streams.start(slot, reply.raw, headers, cursor, changeFilter(caller, request.query.domain), behind)
      } catch (error) {
        slot.release()
        throw error
      }
    },
  )
}
